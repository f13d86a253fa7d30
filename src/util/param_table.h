/*
 * param_table.h - every environment variable Chorus reads, declared once.
 *
 * CHORUS_PARAM(id, name, type, default, flags, doc)
 *   id       suffix of the chorus_param_id enum value (CHORUS_P_<id>)
 *   name     the variable's name
 *   type     BOOL (on/off, 1/0), INT (a whole number), SIZE (bytes: 4096, 512K,
 *            2M, 1G) or STR
 *   default  the value as text, parsed like a user's; NULL: unset
 *   flags    AUTO: accepts "auto" (Chorus decides by the communicator's
 *            shape); OFF: accepts "off" (or 0); AGREE: every rank of a GPU
 *            communicator must set it alike (compared at init); 0: none
 *   doc      one line, printed by `chorus_info`
 * CHORUS_PARAM_GROUP names the section of the entries that follow it.
 *
 * Values come from the environment, then from the config file
 * ($NCCL_CONF_FILE, else ~/.nccl.conf, then /etc/nccl.conf), then the default.
 * No other file calls getenv(). Which algorithm runs where is not a setting
 * but a rule (algo/rules.h: NCCL_ALGO, NCCL_PROTO and CHORUS_TUNE steer it).
 */
/* clang-format off */
CHORUS_PARAM_GROUP("logging")
CHORUS_PARAM(DEBUG,            "NCCL_DEBUG",            STR, NULL, 0, "NONE, VERSION, WARN, INFO, TRACE (unset: WARN lines, no banner)")
CHORUS_PARAM(DEBUG_SUBSYS,     "NCCL_DEBUG_SUBSYS",     STR, "INIT,BOOTSTRAP,ENV", 0, "INFO subsystems: INIT COLL P2P SHM NET TUNING ENV ALLOC ... ALL (^ excludes)")
CHORUS_PARAM(DEBUG_FILE,       "NCCL_DEBUG_FILE",       STR, NULL, 0, "Log to this file (%h host name, %p pid)")
CHORUS_PARAM(CONF_FILE,        "NCCL_CONF_FILE",        STR, NULL, 0, "File of NAME=value lines (default ~/.nccl.conf, then /etc/nccl.conf)")
CHORUS_PARAM_GROUP("bootstrap")
CHORUS_PARAM(COMM_ID,          "NCCL_COMM_ID",          STR, NULL, 0, "Rendezvous at <host>:<port>, hosted by rank 0")
CHORUS_PARAM(JOB_KEY,          "CHORUS_JOB_KEY",        STR, NULL, 0, "A secret all ranks share; keys an NCCL_COMM_ID rendezvous (default: launcher's job id)")
CHORUS_PARAM(SOCKET_IFNAME,    "NCCL_SOCKET_IFNAME",    STR, NULL, 0, "Interfaces: prefixes, ^ excludes, = exact (default: not lo/docker, else lo)")
CHORUS_PARAM(SOCKET_FAMILY,    "NCCL_SOCKET_FAMILY",    STR, NULL, 0, "AF_INET or AF_INET6 only")
CHORUS_PARAM(HOSTID,           "NCCL_HOSTID",           STR, NULL, 0, "Host identity (ranks with equal ids share memory)")
CHORUS_PARAM(BOOTSTRAP_TIMEOUT,"CHORUS_BOOTSTRAP_TIMEOUT", INT, "300", 0, "Seconds an init-time connect, accept or receive may wait")
CHORUS_PARAM_GROUP("host transports")
CHORUS_PARAM(SHM_DISABLE,      "NCCL_SHM_DISABLE",      BOOL, "0", 0, "1: TCP between ranks of one host instead of shared memory")
CHORUS_PARAM(BUFFSIZE,         "NCCL_BUFFSIZE",         SIZE, "1M", 0, "FIFO per peer and channel, cut into CHORUS_NSLOTS slots")
CHORUS_PARAM(NSLOTS,           "CHORUS_NSLOTS",         INT, "8", 0, "Slots per FIFO (pipeline depth)")
CHORUS_PARAM(SOCKET_NTHREADS,  "NCCL_SOCKET_NTHREADS",  INT, "0", 0, "Threads per rank moving TCP bytes, 0..16 (0: the rank's own; 2-4 help AlltoAll)")
CHORUS_PARAM(NSOCKS_PERTHREAD, "NCCL_NSOCKS_PERTHREAD", INT, "1", 0, "TCP sockets per thread, peer and channel (threads x sockets: 16 at most)")
CHORUS_PARAM(NET_PLUGIN,       "NCCL_NET_PLUGIN",       STR, NULL, 0, "Network plugins, comma-separated: paths, or NAME for libnccl-net-NAME.so, or none")
CHORUS_PARAM(NET_GDR_LEVEL,    "NCCL_NET_GDR_LEVEL",    STR, NULL, AGREE, "LOC or 0: GPU buffers never go to a network plugin as they are (else where it takes them)")
CHORUS_PARAM(PROFILER_PLUGIN,  "NCCL_PROFILER_PLUGIN",  STR, NULL, 0, "A profiler plugin: a path, or NAME for libnccl-profiler-NAME.so, or none")
CHORUS_PARAM(NET_MODEL,        "CHORUS_NET",            STR, NULL, AGREE, "Network hop for the cost model: 25,1.5 is 25 us, 1.5 GB/s (unset: probed at init)")
CHORUS_PARAM(NODE_CHUNK,       "CHORUS_NODE_CHUNK",     SIZE, "512K", OFF, "Stage buffer of the one-host schedules (off: no node memory)")
CHORUS_PARAM(NODE_NBUF,        "CHORUS_NODE_NBUF",      INT, "2", 0, "Stage buffers per rank (pipeline depth)")
CHORUS_PARAM(NT_STORE_BYTES,   "CHORUS_NT_STORE_BYTES", SIZE, "auto", AUTO, "Outputs this big take non-temporal stores (auto: half the LLC per rank)")
CHORUS_PARAM(NT_STORES,        "CHORUS_NT_STORES",      BOOL, "auto", AUTO, "Non-temporal stores into stages and slots (auto: measured per rank)")
CHORUS_PARAM_GROUP("progress")
CHORUS_PARAM(OP_TIMEOUT,       "CHORUS_OP_TIMEOUT",     INT, "600", OFF, "Seconds a call may wait for a peer before failing (off: forever)")
CHORUS_PARAM(STUCK_WARN,       "CHORUS_STUCK_WARN",     INT, "10", OFF, "Seconds a call may stall before every waiting rank reports who it waits for")
CHORUS_PARAM(DUMP_SIGNAL,      "CHORUS_DUMP_SIGNAL",    STR, NULL, 0, "A signal (USR1, 12, ...) on which the process writes every communicator's state")
CHORUS_PARAM(DUMP_FILE,        "CHORUS_DUMP_FILE",      STR, "/tmp/chorus-dump.%h.%p.txt", 0, "Where (%h host, %p pid); chorus_info --dump PID shows it")
CHORUS_PARAM(TRACE,            "CHORUS_TRACE",          STR, NULL, 0, "A Chrome trace of every call to this file (%h host, %p pid); tools/chorus_trace.py merges")
CHORUS_PARAM(SPIN_US,          "CHORUS_SPIN_US",        INT, "auto", AUTO, "Microseconds a waiting rank polls (auto: 1000, 0 when ranks > cores)")
CHORUS_PARAM(YIELD_US,         "CHORUS_YIELD_US",       INT, "2000", 0, "Microseconds it then yields the CPU before it sleeps")
CHORUS_PARAM(STATS_INTERVAL,   "CHORUS_STATS_INTERVAL", INT, "off", OFF, "Seconds between lines of live statistics per communicator (off: none)")
CHORUS_PARAM(STATS_FILE,       "CHORUS_STATS_FILE",     STR, "chorus-stats.%h.%p.jsonl", 0, "Their JSON lines (%h host, %p pid); Prometheus text in .prom beside")
CHORUS_PARAM_GROUP("algorithms")
CHORUS_PARAM(ALGO,             "NCCL_ALGO",             STR, NULL, AGREE, "Allowed algorithms, e.g. ring or allreduce:^oneshot (chorus_info --algos)")
CHORUS_PARAM(PROTO,            "NCCL_PROTO",            STR, NULL, AGREE, "Allowed protocols: LL, Simple (per function as NCCL_ALGO)")
CHORUS_PARAM(TUNE,             "CHORUS_TUNE",           STR, NULL, AGREE, "Rules before the defaults: allreduce:0-256K:oneshot,... (--rules)")
CHORUS_PARAM(REPRODUCIBLE,     "CHORUS_REPRODUCIBLE",   BOOL, "0", AGREE, "1: reductions add ranks in rank order, the same bits on any path (host and GPU)")
CHORUS_PARAM_GROUP("GPU communicators")
CHORUS_PARAM(HOST_COMM,        "CHORUS_HOST_COMM",      BOOL, "0", 0, "1: host memory even where GPUs are visible")
CHORUS_PARAM(P2P_DISABLE,      "NCCL_P2P_DISABLE",      BOOL, "0", 0, "1: GPUs meet in pinned host memory, not peer access or IPC")
CHORUS_PARAM(GPU_CUMEM,        "CHORUS_GPU_CUMEM",      BOOL, "1", 0, "Arenas in cuMem memory shared as file descriptors (0: CUDA IPC)")
CHORUS_PARAM(GPU_LAUNCH_THREADS,"CHORUS_GPU_LAUNCH_THREADS", BOOL, "1", 0, "One launcher thread per GPU for groups over several GPUs")
CHORUS_PARAM(GPU_LAUNCH_SPIN_US,"CHORUS_GPU_LAUNCH_SPIN_US", INT, "100", 0, "Microseconds a launcher thread polls before it sleeps")
CHORUS_PARAM(GPU_LL_BYTES,     "CHORUS_GPU_LL_BYTES",   SIZE, "1M", AGREE, "LL slot payload per peer; larger LL calls run in pieces")
CHORUS_PARAM(GPU_LL_CTA_LINES, "CHORUS_GPU_LL_CTA_LINES", INT, "256", AGREE, "16-byte lines per run of an LL CTA (32..65536)")
CHORUS_PARAM(GPU_P2P_LL_BYTES, "CHORUS_GPU_P2P_LL_BYTES", SIZE, "512K", OFF | AGREE, "LL slots per pair: the largest Send/Recv LL can carry")
CHORUS_PARAM(GPU_CHANNELS,     "CHORUS_GPU_CHANNELS",   INT, "64", AGREE, "CTAs (channels) of the FIFO kernels (1..64)")
CHORUS_PARAM(GPU_CHUNK_BYTES,  "CHORUS_GPU_CHUNK_BYTES", SIZE, "auto", AUTO | AGREE, "FIFO step of an exchange (auto: 128K on 2 ranks, 64K)")
CHORUS_PARAM(GPU_FIFO_BYTES,   "CHORUS_GPU_FIFO_BYTES", SIZE, "auto", AUTO | AGREE, "FIFO per channel and peer (auto: 1M on 2 ranks, 512K)")
CHORUS_PARAM(GPU_RING_CHANNELS,"CHORUS_GPU_RING_CHANNELS", INT, "64", AGREE, "CTAs of the ring and chain kernel (1..64)")
CHORUS_PARAM(GPU_RING_CHUNK_BYTES,"CHORUS_GPU_RING_CHUNK_BYTES", SIZE, "256K", AGREE, "Ring step per channel (at most half a FIFO)")
CHORUS_PARAM(GPU_TWOSHOT_CHANNELS,"CHORUS_GPU_TWOSHOT_CHANNELS", INT, "32", AGREE, "CTAs of the two-shot kernel (1..32)")
CHORUS_PARAM(GPU_TWOSHOT_CHUNK_BYTES,"CHORUS_GPU_TWOSHOT_CHUNK_BYTES", SIZE, "32K", AGREE, "Two-shot step per channel")
CHORUS_PARAM(GPU_P2P_SLOTS,    "CHORUS_GPU_P2P_SLOTS",  INT, "2", AGREE, "FIFO slots a Send/Recv streams through (2..16)")
CHORUS_PARAM(GPU_P2P_PULL,     "CHORUS_GPU_P2P_PULL",   BOOL, "0", AGREE, "1: receivers pull Send/Recv chunks from the sender's FIFO")
CHORUS_PARAM(GPU_ZEROCOPY_CHANNELS,"CHORUS_GPU_ZEROCOPY_CHANNELS", INT, "64", AGREE, "Most CTAs of the zero-copy kernel (1..64)")
CHORUS_PARAM(GPU_ZEROCOPY_CTA_BYTES,"CHORUS_GPU_ZEROCOPY_CTA_BYTES", SIZE, "8K", AGREE, "Least of a rank's block per zero-copy CTA")
CHORUS_PARAM(GPU_CE_CHUNK_BYTES,"CHORUS_GPU_CE_CHUNK_BYTES", SIZE, "32M", 0, "Copy of a copy-engine Broadcast chain on 3+ GPUs (1M at least)")
CHORUS_PARAM(GPU_HIER_LANES,   "CHORUS_GPU_HIER_LANES", INT, "4", AGREE, "Across hosts: connections and threads per rank for hierarchical calls (1..8)")
CHORUS_PARAM_GROUP("testing")
CHORUS_PARAM(LEAK_CHECK,       "CHORUS_LEAK_CHECK",     BOOL, "0", 0, "1: WARN at the last communicator destroy if memory is still held")
CHORUS_PARAM(SHARE_GPU,        "CHORUS_SHARE_GPU",      BOOL, "0", 0, "1: ranks of one host may share a GPU (multi-GPU tests on fewer GPUs; slow)")
CHORUS_PARAM(FAULT_ALLOC,      "CHORUS_FAULT_ALLOC",    INT, NULL, 0, "Fault injection: the n-th host allocation after the first init starts fails")
CHORUS_PARAM(FAULT_SHM,        "CHORUS_FAULT_SHM",      INT, NULL, 0, "Fault injection: the n-th shared-memory segment after the first init starts fails")
CHORUS_PARAM(FAULT_DEVICE,     "CHORUS_FAULT_DEVICE",   INT, NULL, 0, "Fault injection: the n-th device or pinned allocation after the first init starts fails")
CHORUS_PARAM_GROUP("ncclConfig_t overrides (unset: the config's value)")
CHORUS_PARAM(COMM_BLOCKING,    "NCCL_COMM_BLOCKING",    INT, NULL, 0, "blocking")
CHORUS_PARAM(CGA_CLUSTER_SIZE, "NCCL_CGA_CLUSTER_SIZE", INT, NULL, 0, "cgaClusterSize")
CHORUS_PARAM(MIN_CTAS,         "NCCL_MIN_CTAS",         INT, NULL, 0, "minCTAs")
CHORUS_PARAM(MAX_CTAS,         "NCCL_MAX_CTAS",         INT, NULL, 0, "maxCTAs")
CHORUS_PARAM(NET,              "NCCL_NET",              STR, NULL, 0, "netName (Chorus has one network: Socket)")
CHORUS_PARAM(SPLIT_SHARE,      "NCCL_COMM_SPLIT_SHARE_RESOURCES", INT, NULL, 0, "splitShare")
CHORUS_PARAM(COLLNET_ENABLE,   "NCCL_COLLNET_ENABLE",   INT, NULL, 0, "collnetEnable")
CHORUS_PARAM(CTA_POLICY,       "NCCL_CTA_POLICY",       INT, NULL, 0, "CTAPolicy")
CHORUS_PARAM(SHRINK_SHARE,     "NCCL_COMM_SHRINK_SHARE_RESOURCES", INT, NULL, 0, "shrinkShare")
CHORUS_PARAM(NVLS_NCHANNELS,   "NCCL_NVLS_NCHANNELS",   INT, NULL, 0, "nvlsCTAs")
CHORUS_PARAM(NCHANNELS_PER_NET_PEER, "NCCL_NCHANNELS_PER_NET_PEER", INT, NULL, 0, "nChannelsPerNetPeer")
CHORUS_PARAM(NVLINK_SCHED,     "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", INT, NULL, 0, "nvlinkCentricSched")
/* clang-format on */
