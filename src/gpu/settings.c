/*
 * settings.c - see settings.h.
 */
#include "gpu/settings.h"

#include "device/kernels.h"
#include "gpu/gpu.h"
#include "util/misc.h"
#include "util/param.h"

/* A size setting that may be "auto": `pair` on 2 ranks, `more` otherwise.
 * Exchanges on 2 ranks have one peer, and larger steps and FIFOs paid off
 * there (2xH200, 2 GiB: the AllReduce ring 3.5% faster with 1 MiB FIFOs
 * than with 512 KiB). */
static int64_t size_auto(chorus_param_id id, int nranks, int64_t pair, int64_t more) {
  const int64_t v = chorus_param_int(id);
  return v != CHORUS_AUTO ? v : nranks == 2 ? pair : more;
}

/* A step: whole 4 KiB pages, 4 KiB to 16 MiB. */
static uint32_t step_of(int64_t v) {
  return (uint32_t)CHORUS_CLAMP(v, 4096, 1 << 24) / 4096 * 4096;
}

static uint32_t count_of(chorus_param_id id, int64_t lo, int64_t hi) {
  return (uint32_t)CHORUS_CLAMP(chorus_param_int(id), lo, hi);
}

void chorus_gpu_settings_read(chorus_gpu_settings *s, int nranks, int staged, int cta_cap) {
  /* maxCTAs: every kernel's CTAs come from these counts (the FIFO
   * kernels' channels, twice them from big_from, the two-shot's half of
   * them, zero-copy's, the LL kernels' blocks and Send/Recv's LL parts). */
  const uint32_t cap = cta_cap > 0 ? (uint32_t)cta_cap : 0;
  s->ll_bytes = (size_t)CHORUS_MAX(4096, chorus_param_int(CHORUS_P_GPU_LL_BYTES)) / 8 * 8;
  s->ll_cta_lines = count_of(CHORUS_P_GPU_LL_CTA_LINES, 32, 65536) / 32 * 32;
  s->pdl = chorus_param_int(CHORUS_P_GPU_PDL) != 0;
  s->ll_blocks = CHORUS_KERN_MAX_BLOCKS;
  if (cap && s->ll_blocks > cap) s->ll_blocks = cap;
  s->channels = count_of(CHORUS_P_GPU_CHANNELS, 1, CHORUS_KERN_CHANNELS);
  if (staged && s->channels > CHORUS_GPU_STAGED_CHANNELS) s->channels = CHORUS_GPU_STAGED_CHANNELS;
  const uint32_t uncapped = s->channels;
  if (cap && s->channels > cap) s->channels = cap;
  /* Channels a cap took away leave their FIFO memory to the others (up to
   * 4x), for rings' steps too where those are auto: a CTA moves more per
   * step. 2xH200, 8 channels: AllReduce 1.32-1.34x faster from 32 MiB with
   * 4 MiB FIFOs and 1 MiB ring steps than with 1 MiB and 256 KiB. */
  int64_t grow = 1;
  while (grow < 4 && s->channels * (uint32_t)grow * 2 <= uncapped) grow *= 2;
  s->chunk_bytes = step_of(size_auto(CHORUS_P_GPU_CHUNK_BYTES, nranks, 128 << 10, 64 << 10));
  /* At least two wide chunks per FIFO, and half a FIFO whole pages. */
  const int64_t fifo =
      size_auto(CHORUS_P_GPU_FIFO_BYTES, nranks, (1 << 20) * grow, (512 << 10) * grow);
  s->fifo_bytes = (uint32_t)CHORUS_CLAMP(fifo, 2 * (int64_t)s->chunk_bytes, 1 << 28) / 8192 * 8192;
  s->wide_from = (uint64_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_WIDE_FROM));
  /* Staged arenas (host memory) take no FIFOs for more channels. */
  s->big_from = staged ? 0 : (uint64_t)CHORUS_MAX(0, chorus_param_int(CHORUS_P_GPU_BIG_FROM));
  if (cap && 2 * s->channels > cap) s->big_from = 0;
  /* Rings use the pipeline's FIFOs, so no more channels than it has. */
  s->ring_channels = count_of(CHORUS_P_GPU_RING_CHANNELS, 1, s->channels);
  s->ring_chunk = step_of(
      size_auto(CHORUS_P_GPU_RING_CHUNK_BYTES, nranks, (256 << 10) * grow, (256 << 10) * grow));
  /* The two-shot's gathering half uses the upper half of the channels. */
  s->twoshot_channels = count_of(CHORUS_P_GPU_TWOSHOT_CHANNELS, 1, CHORUS_KERN_CHANNELS / 2);
  if (s->channels >= 2 && s->twoshot_channels > s->channels / 2)
    s->twoshot_channels = s->channels / 2; /* as twoshot.cu launches it */
  s->twoshot_chunk = step_of(chorus_param_int(CHORUS_P_GPU_TWOSHOT_CHUNK_BYTES));
  s->p2p_ll_bytes =
      (size_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_P2P_LL_BYTES), 0, CHORUS_GPU_P2P_LL_MAX);
  size_t part;
  const uint32_t parts = cap && cap < CHORUS_KERN_P2P_PARTS ? cap : CHORUS_KERN_P2P_PARTS;
  s->p2p_ll_parts = chorus_kern_p2p_parts(s->p2p_ll_bytes, parts, &part);
  s->p2p_ll_lines = (uint32_t)(chorus_kern_p2p_part_cap(s->p2p_ll_bytes, parts) / 8);
  s->p2p_slots = count_of(CHORUS_P_GPU_P2P_SLOTS, 2, 16);
  s->p2p_pull = chorus_param_int(CHORUS_P_GPU_P2P_PULL) != 0;
  s->zc_channels = count_of(CHORUS_P_GPU_ZEROCOPY_CHANNELS, 1, CHORUS_KERN_MAX_BLOCKS);
  if (cap && s->zc_channels > cap) s->zc_channels = cap;
  s->zc_cta_bytes =
      (size_t)CHORUS_CLAMP(chorus_param_int(CHORUS_P_GPU_ZEROCOPY_CTA_BYTES), 4096, 1 << 30);
  s->ce_chunk = (size_t)CHORUS_MAX(1 << 20, chorus_param_int(CHORUS_P_GPU_CE_CHUNK_BYTES));
  s->cumem = chorus_param_int(CHORUS_P_GPU_CUMEM) != 0;
}

void chorus_gpu_settings_plan(const chorus_gpu_settings *s, chorus_plan_comm *p) {
  p->twoshot_ll_max = chorus_gpu_twoshot_ll_max(s->ll_bytes / 8, s->ll_cta_lines, s->ll_blocks);
  p->p2p_ll_max = s->p2p_ll_bytes;
  /* 12 KiB of a peer's lines per LL CTA: where the one-shot's Simple
   * steps overtook LL lines with 8 and 16 CTAs (2xH200); without a cap
   * the rules' sizes already hold it. */
  p->ll_peer_max = s->ll_blocks < CHORUS_KERN_MAX_BLOCKS ? (size_t)s->ll_blocks * (12 << 10) : 0;
  p->channels = s->channels;
  p->chunk_bytes = s->chunk_bytes;
  p->ring_channels = s->ring_channels;
  p->ring_chunk = s->ring_chunk;
  p->twoshot_channels = s->twoshot_channels;
  p->twoshot_chunk = s->twoshot_chunk;
  p->zc_channels = s->zc_channels;
  p->zc_cta_bytes = s->zc_cta_bytes;
  p->big_from = s->big_from;
}
