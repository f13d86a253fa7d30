/*
 * ordered.c - reductions in one fixed order (CHORUS_REPRODUCIBLE=1).
 *
 * Every rank's contribution is gathered first, then added in rank order,
 * ((r0 + r1) + r2) + ..., one pair at a time (float16, bfloat16 and fp8
 * rounded to the type after each), so a result's bits depend on the
 * inputs alone: not on the algorithm, the pieces a slot cuts a buffer
 * into, the ranks' places in a ring, or the path between them; and every
 * rank of an AllReduce holds the same bits.
 *
 *   AllReduce      an AllGather of the contributions, each rank adds all
 *   ReduceScatter  an AlltoAll: each rank receives its block of every
 *                  contribution and adds them
 *   Reduce         a Gather to the root, which adds them
 *
 * The gathering is a call of its own on the communicator (the child,
 * prepared with its parent so that both take their sequence numbers in
 * call order), run by whatever algorithm the planner gives it; bytes only
 * move there, so its choice cannot change a bit. A PreMulSum's scalar is
 * each rank's own: the owner scales its contribution before it leaves.
 * The cost: a rank receives n - 1 whole contributions where a ring moves
 * two (AllReduce), and adds them on one core.
 */
#include "coll/coll.h"
#include "host/reduce.h"
#include "util/alloc.h"
#include "util/check.h"
#include "util/coro.h"
#include "util/misc.h"

#define O (op->u.ordered)

static size_t align64(size_t v) {
  return (v + 63) / 64 * 64;
}

/* The gathering call's function. */
static int child_func(int func) {
  return func == CHORUS_FUNC_ALLREDUCE       ? CHORUS_FUNC_ALLGATHER
         : func == CHORUS_FUNC_REDUCESCATTER ? CHORUS_FUNC_ALLTOALL
                                             : CHORUS_FUNC_GATHER;
}

ncclResult_t chorus_ordered_prepare(chorus_op *op) {
  const int n = op->cc->nranks;
  const size_t es = op->esize, c = op->count;
  const size_t mine = (op->func == CHORUS_FUNC_REDUCESCATTER ? (size_t)n : 1) * c * es;
  const int gathers = op->func != CHORUS_FUNC_REDUCE || op->cc->rank == op->root;
  const int scales = op->red.kind == CHORUS_RED_PREMULSUM;
  const size_t at_mine = align64(sizeof(chorus_op));
  const size_t at_all = at_mine + (scales ? align64(mine) : 0);
  const size_t total = at_all + (gathers ? (size_t)n * c * es : 0);
  char *s = chorus_op_scratch(op, total);
  if (!s) return chorus_error(ncclSystemError, "out of memory for a reproducible reduction");
  chorus_op *child = (chorus_op *)s;
  *child = *op;
  child->func = child_func(op->func);
  child->sendbuff = scales ? (const void *)(s + at_mine) : op->sendbuff;
  child->recvbuff = gathers ? s + at_all : NULL;
  child->root = op->func == CHORUS_FUNC_REDUCE ? op->root : -1;
  child->red.kind = CHORUS_RED_SUM;
  child->red.scalar_dev = NULL;
  child->nccl_op = 0;
  child->scratch = NULL;
  child->scratch_bytes = 0;
  child->next_op = NULL;
  child->wait_info = NULL;
  child->ticks = 0;
  O.child = child;
  O.all = gathers ? s + at_all : NULL;
  O.scaled = scales ? s + at_mine : NULL;
  O.mine_bytes = mine;
  const ncclResult_t res = chorus_coll_prepare(child);
  if (res != ncclSuccess) { /* the op never runs: nothing of it stays */
    chorus_op_scratch_drop(op);
  }
  return res;
}

/* The child's waits are the op's. */
static void ordered_wait_info(chorus_op *op, chorus_waitset *ws) {
  chorus_op *child = O.child;
  if (child->wait_info)
    child->wait_info(child, ws);
  else if (child->wait_conn)
    child->wait_conn->ops->wait_info(child->wait_conn, child->wait_dir, ws);
}

/* One step of the child, its moves and waits the op's; once it ends, its
 * scratch goes (the executor frees only the op's). */
static ncclResult_t step_child(chorus_op *op) {
  chorus_op *child = O.child;
  const uint64_t before = child->ticks;
  child->wait_conn = NULL;
  const ncclResult_t res = child->step(child);
  op->ticks += child->ticks - before;
  op->wait_conn = child->wait_conn;
  op->wait_dir = child->wait_dir;
  if (res != ncclInProgress) {
    chorus_op_scratch_drop(child);
    op->wait_info = NULL;
  }
  return res;
}

/* dst = ((g[0] + g[1]) + g[2]) + ..., the last step finishing the
 * reduction (SUMPOSTDIV's division). */
static void add_in_order(const chorus_op *op, void *dst, const char *all) {
  const int n = op->cc->nranks;
  const size_t bytes = op->count * op->esize;
  chorus_red red = op->red;
  if (red.kind == CHORUS_RED_PREMULSUM) red.kind = CHORUS_RED_SUM; /* scaled by the owners */
  if (n == 1) {
    const void *src[1] = {all};
    chorus_reduce(&red, dst, src, 1, op->count, 0, CHORUS_RED_FINALIZE);
    return;
  }
  for (int r = 1; r < n; r++) {
    const void *src[2] = {r == 1 ? all : dst, all + (size_t)r * bytes};
    chorus_reduce(&red, dst, src, 2, op->count, 0, r == n - 1 ? CHORUS_RED_FINALIZE : 0);
  }
}

ncclResult_t chorus_ordered(chorus_op *op) {
  ncclResult_t res;
  CORO_BEGIN(op->co);
  op->wait_info = ordered_wait_info;
  if (O.scaled) { /* this rank's PreMulSum scalar, on its own contribution */
    const void *src[1] = {op->sendbuff};
    chorus_reduce(&op->red, O.scaled, src, 1, O.mine_bytes / op->esize, 1u, 0);
  }
  CORO_AWAIT_RES(op->co, res, step_child(op));
  if (O.all) add_in_order(op, op->recvbuff, O.all);
  CORO_END(op->co);
}
