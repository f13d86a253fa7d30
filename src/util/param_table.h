/*
 * param_table.h - every environment variable Chorus reads, declared once.
 *
 * CHORUS_PARAM(id, name, type, default, doc)
 *   id       suffix of the chorus_param_id enum value (CHORUS_P_<id>)
 *   name     the variable's name
 *   type     INT (64-bit signed) or STR
 *   default  for INT an integer literal, for STR a string literal or NULL
 *   doc      one line, printed by `chorus_info`
 *
 * Values come from the environment, then from the config file
 * ($NCCL_CONF_FILE, else ~/.nccl.conf, then /etc/nccl.conf), then the default.
 * No other file calls getenv().
 */
/* clang-format off */
/* logging */
CHORUS_PARAM(DEBUG,            "NCCL_DEBUG",            STR, NULL,   "Log level: NONE, VERSION, WARN, INFO, ABORT, TRACE (unset: WARN lines only, no version banner)")
CHORUS_PARAM(DEBUG_SUBSYS,     "NCCL_DEBUG_SUBSYS",     STR, "INIT,BOOTSTRAP,ENV", "INFO subsystems (comma list, ^ excludes): INIT COLL P2P SHM NET GRAPH TUNING ENV ALLOC CALL PROXY NVLS BOOTSTRAP REG PROFILE RAS ALL")
CHORUS_PARAM(DEBUG_FILE,       "NCCL_DEBUG_FILE",       STR, NULL,   "Write the log to this file; %h is the host name, %p the pid")
CHORUS_PARAM(CONF_FILE,        "NCCL_CONF_FILE",        STR, NULL,   "Config file of NAME=value lines (default ~/.nccl.conf, then /etc/nccl.conf)")
/* bootstrap and sockets */
CHORUS_PARAM(COMM_ID,          "NCCL_COMM_ID",          STR, NULL,   "Fixed rendezvous address <ip>:<port>, [<ipv6>]:<port> or <host>:<port>; rank 0 hosts it")
CHORUS_PARAM(SOCKET_IFNAME,    "NCCL_SOCKET_IFNAME",    STR, NULL,   "Interfaces for bootstrap and TCP: prefixes, ^ excludes, = exact (default: not lo/docker, else lo)")
CHORUS_PARAM(SOCKET_FAMILY,    "NCCL_SOCKET_FAMILY",    STR, NULL,   "AF_INET or AF_INET6 to restrict the address family")
CHORUS_PARAM(HOSTID,           "NCCL_HOSTID",           STR, NULL,   "Override the host identity (ranks with equal ids share memory)")
CHORUS_PARAM(BOOTSTRAP_TIMEOUT,"CHORUS_BOOTSTRAP_TIMEOUT", INT, 300, "Seconds any init-time connect, accept or receive may wait")
/* transports */
CHORUS_PARAM(SHM_DISABLE,      "NCCL_SHM_DISABLE",      INT, 0,      "1: no shared memory between ranks of one host; use TCP")
CHORUS_PARAM(BUFFSIZE,         "NCCL_BUFFSIZE",         INT, 1048576, "Bytes of FIFO per peer and channel (split into CHORUS_NSLOTS slots)")
CHORUS_PARAM(NSLOTS,           "CHORUS_NSLOTS",         INT, 8,      "Slots per FIFO (pipeline depth)")
CHORUS_PARAM(NSOCKS_PERTHREAD, "NCCL_NSOCKS_PERTHREAD", INT, 1,      "TCP sockets (streams) per peer and channel, 1..8; consecutive messages alternate between them")
CHORUS_PARAM(NODE_CHUNK,       "CHORUS_NODE_CHUNK",     INT, 524288, "Bytes per shared-memory stage buffer of direct algorithms (0: no node memory)")
CHORUS_PARAM(NODE_NBUF,        "CHORUS_NODE_NBUF",      INT, 2,      "Stage buffers per rank for direct algorithms (pipeline depth)")
CHORUS_PARAM(STREAM_BYTES,     "CHORUS_STREAM_BYTES",   INT, -1,     "Outputs of at least this many bytes per rank are written with streaming stores (-1: last-level cache / (2 x ranks on the host); 0: always)")
CHORUS_PARAM(SHARED_STREAM,    "CHORUS_SHARED_STREAM",  INT, -1,     "Stores into stage buffers and FIFO slots: -1 measure and pick, 0 normal, 1 streaming")
/* progress and deadlines */
CHORUS_PARAM(OP_TIMEOUT,       "CHORUS_OP_TIMEOUT",     INT, 600,    "Seconds a collective may wait for a peer before failing (0: forever)")
CHORUS_PARAM(SPIN_US,          "CHORUS_SPIN_US",        INT, -1,     "Microseconds a waiting rank polls before yielding (-1: 1000, or 0 when ranks outnumber cores)")
CHORUS_PARAM(YIELD_US,         "CHORUS_YIELD_US",       INT, 2000,   "Microseconds a waiting rank then yields the CPU before it sleeps")
/* communicator placement */
CHORUS_PARAM(HOST_COMM,        "CHORUS_HOST_COMM",      INT, 0,      "1: communicators use host memory even when GPUs are visible")
/* GPU communicators */
CHORUS_PARAM(P2P_DISABLE,      "NCCL_P2P_DISABLE",      INT, 0,      "1: GPUs reach each other through pinned shared host memory instead of peer access or CUDA IPC (every kernel, slower)")
CHORUS_PARAM(GPU_CUMEM,        "CHORUS_GPU_CUMEM",      INT, 1,      "1: GPU windows in cuMem memory, handed to the other processes as POSIX file descriptors over Unix sockets (CUDA IPC where the driver cannot export one); 0: cudaMalloc and CUDA IPC")
CHORUS_PARAM(GPU_LAUNCH_THREADS,"CHORUS_GPU_LAUNCH_THREADS", INT, 1, "1: a group call spanning several GPUs of one process launches each GPU's kernels from that GPU's own thread, all at once; 0: the calling thread launches them in turn")
CHORUS_PARAM(GPU_LAUNCH_SPIN_US,"CHORUS_GPU_LAUNCH_SPIN_US", INT, 100, "Microseconds a GPU launcher thread polls for the next group after one before it sleeps")
CHORUS_PARAM(GPU_LL_BYTES,     "CHORUS_GPU_LL_BYTES",   INT, 1048576, "Bytes of LL payload per peer in the GPU slots; larger LL calls run in pieces")
CHORUS_PARAM(GPU_P2P_LL_BYTES, "CHORUS_GPU_P2P_LL_BYTES", INT, 524288, "GPU Send/Recv of at most this many bytes moves as LL lines (8 bytes per 16-byte line, one epoch per pair of ranks and 4 KiB part, a CTA per part) in one launch; larger ones in FIFO chunks (0: never LL)")
CHORUS_PARAM(GPU_P2P_CE_BYTES, "CHORUS_GPU_P2P_CE_BYTES", INT, 8388608, "GPU Send/Recv of at least this many bytes between GPUs of one process, both ends in one group, runs on the copy engine (cudaMemcpyAsync into the receiver's buffer) instead of the kernels (0: never); below, the copy's joins of two streams (about 19 us) cost more than the kernels (2xH200)")
CHORUS_PARAM(GPU_BCAST_CE_BYTES, "CHORUS_GPU_BCAST_CE_BYTES", INT, 0, "GPU Broadcast of at least this many bytes on 3+ GPUs of one process, every rank's call in one group, runs on the copy engine (a chain of cudaMemcpyAsync, CHORUS_GPU_BCAST_CE_CHUNK at a time) instead of the kernels (0: never, the default: on 4xH100 at 1 GiB it took 3257 us with 64 MiB chunks against 3163 for the kernels)")
CHORUS_PARAM(GPU_BCAST_CE_BYTES_PAIR, "CHORUS_GPU_BCAST_CE_BYTES_PAIR", INT, 67108864, "CHORUS_GPU_BCAST_CE_BYTES for communicators of 2 GPUs (one copy, on the receiver's stream; 0: never). 2xH200, 2026-11-26: even with the kernels at 64 MiB, 1.10x them and 1.08x NCCL at 1 GiB, slower below")
CHORUS_PARAM(GPU_BCAST_CE_CHUNK, "CHORUS_GPU_BCAST_CE_CHUNK", INT, 33554432, "Bytes per copy of a copy-engine Broadcast chain on 3+ GPUs (at least 1 MiB)")
CHORUS_PARAM(GPU_XCHG_CE_BYTES, "CHORUS_GPU_XCHG_CE_BYTES", INT, 0, "GPU AllGather and AlltoAll (not in place) of at least this many bytes of the larger buffer, with every rank a GPU of this process and every rank's call in one group, run as copies on the copy engine, each rank pulling the blocks meant for it (0: never), on 3+ GPUs; off by default (4xH100, 1 GiB: AllGather 6197 us against 2334 for the kernels, AlltoAll 6201 against 2537)")
CHORUS_PARAM(GPU_XCHG_CE_BYTES_PAIR, "CHORUS_GPU_XCHG_CE_BYTES_PAIR", INT, 67108864, "CHORUS_GPU_XCHG_CE_BYTES for communicators of 2 GPUs (0: never). 2xH200, 2026-11-26, 1 GiB: AllGather 1.11x the kernels (1.43x NCCL), AlltoAll 1.34x (1.16x NCCL); at 64 MiB AllGather 0.96x the kernels, AlltoAll 1.15x; slower below")
CHORUS_PARAM(GPU_P2P_PULL,     "CHORUS_GPU_P2P_PULL",   INT, 0,      "1: GPU Send/Recv through the FIFOs has each sender fill a FIFO in its own window that the receiver loads from (a pull, as NCCL's P2P read); 0: senders store into the receiver's FIFO (every rank must agree; pulling measured 7-12% slower than pushing with two slots, 2 processes on 4xH200)")
CHORUS_PARAM(GPU_P2P_SLOTS,    "CHORUS_GPU_P2P_SLOTS",  INT, 2,      "Slots of each FIFO that a large GPU Send/Recv streams through (2..16): its steps are CHORUS_GPU_FIFO_BYTES / this; more slots let a sender run further ahead of its receiver")
CHORUS_PARAM(GPU_PIPE_BYTES,   "CHORUS_GPU_PIPE_BYTES", INT, 262144, "GPU blocks of at least this many bytes per peer run in the pipelined kernel (full 16-byte payload, chunks with credits) instead of LL lines, on 3+ ranks")
CHORUS_PARAM(GPU_PIPE_BYTES_PAIR, "CHORUS_GPU_PIPE_BYTES_PAIR", INT, 1048576, "CHORUS_GPU_PIPE_BYTES for communicators of 2 ranks")
CHORUS_PARAM(GPU_TWOSHOT_BYTES,"CHORUS_GPU_TWOSHOT_BYTES", INT, 16384, "GPU AllReduce of at least this many bytes on 3+ ranks runs as ReduceScatter plus AllGather in one launch, until the ring takes over (-1: never)")
CHORUS_PARAM(GPU_TWOSHOT_BYTES_PAIR,"CHORUS_GPU_TWOSHOT_BYTES_PAIR", INT, 262144, "CHORUS_GPU_TWOSHOT_BYTES for communicators of 2 ranks, where the two-shot runs only in LL lines (up to CHORUS_GPU_TWOSHOT_LL_BYTES; -1: never)")
CHORUS_PARAM(GPU_TWOSHOT_LL_BYTES,"CHORUS_GPU_TWOSHOT_LL_BYTES", INT, 1048576, "GPU two-shot AllReduce up to this many bytes moves LL lines (one flag per 8 bytes) instead of FIFO chunks, where the LL slots hold two shares")
CHORUS_PARAM(GPU_LL_CTA_LINES, "CHORUS_GPU_LL_CTA_LINES", INT, 256, "16-byte lines per run of the GPU LL kernels, whose CTAs take runs in turn (32..65536, a multiple of 32)")
CHORUS_PARAM(GPU_TWOSHOT_CHANNELS,"CHORUS_GPU_TWOSHOT_CHANNELS", INT, 32, "CTAs of the GPU two-shot kernel (1..32, at most half of CHORUS_GPU_CHANNELS)")
CHORUS_PARAM(GPU_TWOSHOT_CHUNK_BYTES,"CHORUS_GPU_TWOSHOT_CHUNK_BYTES", INT, 32768, "Bytes per two-shot step of one GPU channel (a multiple of 4096)")
CHORUS_PARAM(GPU_CHAIN_BYTES,  "CHORUS_GPU_CHAIN_BYTES", INT, 262144, "GPU Broadcast and Reduce of at least this many bytes on 3+ ranks run as a pipelined chain instead of a fan-out from or to the root")
CHORUS_PARAM(GPU_CHAIN_BYTES_PAIR,"CHORUS_GPU_CHAIN_BYTES_PAIR", INT, 262144, "GPU Broadcast and Reduce of at least this many bytes on 2 ranks run in the chain kernel (one hop, ring-sized steps) instead of the pipelined exchange (-1: never)")
CHORUS_PARAM(GPU_CHUNK_BYTES_PAIR,"CHORUS_GPU_CHUNK_BYTES_PAIR", INT, 131072, "CHORUS_GPU_CHUNK_BYTES for communicators of 2 ranks, whose exchanges have one peer (0: the same)")
CHORUS_PARAM(GPU_RING_BYTES,   "CHORUS_GPU_RING_BYTES",  INT, 2097152,      "GPU AllReduce, AllGather and ReduceScatter run as one-launch rings from this many bytes per rank's block (an AllReduce's buffer / ranks; 0: never)")
CHORUS_PARAM(GPU_RING_CHANNELS,"CHORUS_GPU_RING_CHANNELS", INT, 64,   "CTAs of the GPU ring kernel (1..64)")
CHORUS_PARAM(GPU_RING_CHUNK_BYTES,"CHORUS_GPU_RING_CHUNK_BYTES", INT, 262144, "Bytes per ring step of one GPU channel (a multiple of 4096, at most half of CHORUS_GPU_FIFO_BYTES)")
CHORUS_PARAM(GPU_DIRECT,       "CHORUS_GPU_DIRECT",     INT, 1,      "1: GPU AllReduce, AllGather and ReduceScatter between buffers every GPU of the communicator reaches (one process: cudaMalloc or ncclMemAlloc memory, all ranks in one group; processes: NCCL_WIN_COLL_SYMMETRIC windows) run zero-copy, sizes permitting; 0: never")
CHORUS_PARAM(GPU_DIRECT_BYTES, "CHORUS_GPU_DIRECT_BYTES", INT, 1048576, "Zero-copy GPU collectives from this many bytes of the larger buffer (an AllReduce's, an AllGather's output, a ReduceScatter's input); below, the LL kernels need no barriers and were faster (2xH100)")
CHORUS_PARAM(GPU_DIRECT_MAX,   "CHORUS_GPU_DIRECT_MAX", INT, 16777216, "Zero-copy GPU AllReduce up to this many bytes (0: no limit); above, the ring was faster (2xH100). AllGather and ReduceScatter: CHORUS_GPU_DIRECT_AGRS_MAX")
CHORUS_PARAM(GPU_DIRECT_AGRS_MAX,"CHORUS_GPU_DIRECT_AGRS_MAX", INT, 67108864, "Zero-copy GPU AllGather and ReduceScatter on 3 or more GPUs up to this many bytes of the larger buffer (0: no limit); above, the rings were faster (4xH200: 1-3% at 128 MiB, 2-5% at 512 MiB). On 2 GPUs zero-copy was faster at every size (2xH100) and has no upper limit")
CHORUS_PARAM(GPU_DIRECT_CHANNELS,"CHORUS_GPU_DIRECT_CHANNELS", INT, 64, "Most CTAs of the zero-copy GPU kernel (1..64)")
CHORUS_PARAM(GPU_DIRECT_CTA_BYTES,"CHORUS_GPU_DIRECT_CTA_BYTES", INT, 8192, "Bytes of its rank's block each CTA of the zero-copy GPU kernel takes at least (fewer CTAs for smaller blocks)")
CHORUS_PARAM(GPU_PIPE_FENCE,   "CHORUS_GPU_PIPE_FENCE", INT, 0,      "1: the pipelined GPU kernel issues a system fence before each release of a chunk (the release alone orders the chunk's copies; kept to compare)")
CHORUS_PARAM(GPU_CHANNELS,     "CHORUS_GPU_CHANNELS",   INT, 64,     "CTAs of the pipelined GPU kernel (1..64)")
CHORUS_PARAM(GPU_CHUNK_BYTES,  "CHORUS_GPU_CHUNK_BYTES", INT, 65536, "Bytes per pipeline step of one GPU channel when exchanging with every peer at once (a multiple of 4096)")
CHORUS_PARAM(GPU_FIFO_BYTES,   "CHORUS_GPU_FIFO_BYTES",  INT, 524288, "Bytes of pipeline FIFO per GPU channel and peer (a Send/Recv stream steps by a CHORUS_GPU_P2P_SLOTS-th of it)")
CHORUS_PARAM(GPU_FIFO_BYTES_PAIR, "CHORUS_GPU_FIFO_BYTES_PAIR", INT, 1048576, "CHORUS_GPU_FIFO_BYTES for communicators of 2 ranks (0: the same). 2xH200, 2026-11-26, 2 GiB: 1 MiB against 512 KiB made the AllReduce ring 3.5% faster (1.01x NCCL), Send/Recv with processes 3.5%, Broadcast 0.8%; 64 MiB more window per rank")
/* config overrides (read after ncclConfig_t, as NCCL does) */
CHORUS_PARAM(COMM_BLOCKING,    "NCCL_COMM_BLOCKING",    INT, INT_MIN, "Overrides ncclConfig_t.blocking")
CHORUS_PARAM(CGA_CLUSTER_SIZE, "NCCL_CGA_CLUSTER_SIZE", INT, INT_MIN, "Overrides ncclConfig_t.cgaClusterSize (0..8)")
CHORUS_PARAM(MIN_CTAS,         "NCCL_MIN_CTAS",         INT, INT_MIN, "Overrides ncclConfig_t.minCTAs")
CHORUS_PARAM(MAX_CTAS,         "NCCL_MAX_CTAS",         INT, INT_MIN, "Overrides ncclConfig_t.maxCTAs")
CHORUS_PARAM(NET,              "NCCL_NET",              STR, NULL,   "Overrides ncclConfig_t.netName (Chorus has one network: Socket)")
CHORUS_PARAM(SPLIT_SHARE,      "NCCL_COMM_SPLIT_SHARE_RESOURCES", INT, INT_MIN, "Overrides ncclConfig_t.splitShare")
CHORUS_PARAM(COLLNET_ENABLE,   "NCCL_COLLNET_ENABLE",   INT, INT_MIN, "Overrides ncclConfig_t.collnetEnable")
CHORUS_PARAM(CTA_POLICY,       "NCCL_CTA_POLICY",       INT, INT_MIN, "Overrides ncclConfig_t.CTAPolicy (0..2)")
CHORUS_PARAM(SHRINK_SHARE,     "NCCL_COMM_SHRINK_SHARE_RESOURCES", INT, INT_MIN, "Overrides ncclConfig_t.shrinkShare")
CHORUS_PARAM(NVLS_NCHANNELS,   "NCCL_NVLS_NCHANNELS",   INT, INT_MIN, "Overrides ncclConfig_t.nvlsCTAs")
CHORUS_PARAM(NCHANNELS_PER_NET_PEER, "NCCL_NCHANNELS_PER_NET_PEER", INT, INT_MIN, "Overrides ncclConfig_t.nChannelsPerNetPeer")
CHORUS_PARAM(NVLINK_SCHED,     "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", INT, INT_MIN, "Overrides ncclConfig_t.nvlinkCentricSched")
/* algorithm selection */
CHORUS_PARAM(ALGO,             "NCCL_ALGO",             STR, NULL,   "Allowed algorithms, e.g. ring or allreduce:ring (^ excludes); see chorus_info")
CHORUS_PARAM(PROTO,            "NCCL_PROTO",            STR, NULL,   "Allowed protocols (LL, LL128, Simple; per function as NCCL_ALGO): GPU communicators run LL and Simple, host communicators have one protocol and only log it")
/* testing aids */
CHORUS_PARAM(FAULT_ALLOC,      "CHORUS_FAULT_ALLOC",    INT, 0,      "Tests: make the Nth host allocation from now fail (0: never)")
CHORUS_PARAM(LEAK_CHECK,       "CHORUS_LEAK_CHECK",     INT, 0,      "1: WARN at the last communicator destroy if library memory is still held")
/* clang-format on */
