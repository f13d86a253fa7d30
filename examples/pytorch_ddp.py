"""pytorch_ddp.py - 03_ddp_training's lesson in PyTorch: DistributedDataParallel
over NCCL, which is Chorus when its libnccl.so.2 is preloaded; then each of
PyTorch's collectives, checked.

  torchrun --nproc-per-node 2 examples/pytorch_ddp.py                  # NVIDIA's NCCL
  LD_PRELOAD=$PWD/build/libnccl.so.2 torchrun --nproc-per-node 2 examples/pytorch_ddp.py

Across machines, one torchrun per machine (--nnodes 2 --node-rank 0 or 1
--master-addr <first machine>); on one machine, NCCL_HOSTID=a and b make
the two torchruns two hosts to both libraries (scripts/torch_ddp.sh).

An MLP like 03_ddp_training's, one hidden layer deeper (8 features, two
hidden layers of 32 ReLU units, 3 classes: three linear layers), on the
same kind of synthetic clouds of points. Each step:
  1. the global batch of 64 is cut across the ranks, every world-th sample
     from position `rank` on (what DistributedSampler does);
  2. forward and backward on the rank's share;
  3. DDP's hooks all-reduce the gradients (average) while backward runs;
  4. every rank applies the same SGD step, so the copies stay equal.
Loss and accuracy are summed over the ranks with dist.all_reduce.

Checks (exit 1 if one fails): every rank ends with rank 0's weights,
bit for bit; rank 0's weights equal, to float rounding, those of one model
trained alone on each whole global batch; the model learns (accuracy of
at least 90%); and PyTorch's collectives (broadcast, reduce, all-reduce,
scatter, gather, all-gather, reduce-scatter, all-to-all, send/recv, a
subgroup) return what their definitions say.
Without a GPU it runs on the CPU with Gloo: the lesson, not Chorus.
"""
import ctypes
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES, HIDDEN, CLASSES = 8, 32, 3
SAMPLES, BATCH, EPOCHS, LR = 1024, 64, 8, 0.2


def make_blobs(gen):
    """CLASSES clouds around random centres in [-2, 2]^FEATURES; label s % CLASSES."""
    centres = torch.rand(CLASSES, FEATURES, generator=gen) * 4 - 2
    y = torch.arange(SAMPLES) % CLASSES
    x = centres[y] + 0.8 * torch.randn(SAMPLES, FEATURES, generator=gen)
    return x, y


def make_model(device):
    torch.manual_seed(7)  # the same initial weights on every rank and in the reference
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, CLASSES)).to(device)


def epoch_order(epoch):
    """The epoch's shuffle, seeded by the epoch: every rank computes the same one."""
    return torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(1000 + epoch))


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_ddp(x, y, rank, world, device):
    model = DDP(make_model(device), device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    accuracy = 0.0
    for epoch in range(1, EPOCHS + 1):
        order = epoch_order(epoch)
        stats = torch.zeros(2, device=device)  # summed loss, correct answers
        for step in range(SAMPLES // BATCH):
            batch = order[step * BATCH:(step + 1) * BATCH][rank::world]  # this rank's share
            xb, yb = x[batch].to(device), y[batch].to(device)
            out = model(xb)
            loss = loss_fn(out, yb)  # mean over the local share
            opt.zero_grad()
            loss.backward()  # DDP averages the gradients over the ranks here
            opt.step()
            stats += torch.stack([loss.detach() * len(batch), (out.argmax(1) == yb).sum().float()])
        dist.all_reduce(stats)  # the epoch over all ranks
        accuracy = stats[1].item() / SAMPLES
        if rank == 0:
            print(f"epoch {epoch}/{EPOCHS}  loss {stats[0].item() / SAMPLES:.4f}  "
                  f"accuracy {100 * accuracy:5.1f}%", flush=True)
    return model.module, accuracy


def train_alone(x, y, device):
    """One model, each whole global batch per step: what the ranks together computed."""
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, EPOCHS + 1):
        order = epoch_order(epoch)
        for step in range(SAMPLES // BATCH):
            batch = order[step * BATCH:(step + 1) * BATCH]
            loss = loss_fn(model(x[batch].to(device)), y[batch].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


def other_calls(rank, world, device):
    """PyTorch's collectives, each checked against its definition."""
    bad = []
    # broadcast: parameters from rank 0 (DDP does this at start)
    t = torch.full((1000,), float(rank), device=device)
    dist.broadcast(t, src=0)
    if not torch.equal(t, torch.zeros_like(t)):
        bad.append("broadcast")
    # reduce: the sum of the ranks' values on the root only (a loss for logging)
    t = torch.full((333,), float(rank + 1), device=device)
    dist.reduce(t, dst=0)
    if rank == 0 and not torch.equal(t, torch.full_like(t, world * (world + 1) / 2)):
        bad.append("reduce")
    # scatter: rank 0 hands rank r its piece, r * 10 (a data loader on one rank)
    piece = torch.empty(100, device=device)
    pieces = [torch.full((100,), 10.0 * r, device=device) for r in range(world)] if rank == 0 else None
    dist.scatter(piece, pieces, src=0)
    if not torch.equal(piece, torch.full_like(piece, 10.0 * rank)):
        bad.append("scatter")
    # gather: every rank's piece to rank 0, in rank order (predictions for evaluation)
    bins = [torch.empty(100, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(piece, bins, dst=0)
    if rank == 0 and any(not torch.equal(b, torch.full_like(b, 10.0 * r)) for r, b in enumerate(bins)):
        bad.append("gather")
    # all-gather, list form: rank r's tensor at position r on every rank
    outs = [torch.empty(50, device=device) for _ in range(world)]
    dist.all_gather(outs, torch.full((50,), float(rank), device=device))
    if any(not torch.equal(o, torch.full_like(o, float(r))) for r, o in enumerate(outs)):
        bad.append("all_gather")
    # reduce-scatter, list form: rank r gets the sum over ranks of everyone's list item r
    part = torch.empty(50, device=device)
    dist.reduce_scatter(part, [torch.full((50,), float(r + rank), device=device) for r in range(world)])
    if not torch.equal(part, torch.full_like(part, float(world * rank + world * (world - 1) // 2))):
        bad.append("reduce_scatter")
    # all-gather: rank r contributes r+1 everywhere (sharded optimisers, FSDP)
    mine = torch.full((257,), float(rank + 1), device=device)
    out = torch.empty(257 * world, device=device)
    dist.all_gather_into_tensor(out, mine)
    if not torch.equal(out, torch.arange(1, world + 1, device=device).float().repeat_interleave(257)):
        bad.append("all_gather_into_tensor")
    # reduce-scatter: element i of every rank's input is i; rank r gets block r, summed
    src = torch.arange(64 * world, device=device).float()
    part = torch.empty(64, device=device)
    dist.reduce_scatter_tensor(part, src)
    if not torch.equal(part, world * torch.arange(64 * rank, 64 * (rank + 1), device=device).float()):
        bad.append("reduce_scatter_tensor")
    # all-to-all: block j of rank r goes to rank j (expert parallelism)
    send = torch.full((world * 16,), float(rank), device=device) + torch.arange(world, device=device).repeat_interleave(16) * 100
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    want = torch.arange(world, device=device).float().repeat_interleave(16) + 100 * rank
    if not torch.equal(recv, want):
        bad.append("all_to_all_single")
    # send/recv: rank 0 to the last rank (pipeline parallelism)
    if world > 1 and rank in (0, world - 1):
        msg = torch.arange(4096, device=device).float()
        if rank == 0:
            dist.send(msg, dst=world - 1)
        else:
            got = torch.empty_like(msg)
            dist.recv(got, src=0)
            if not torch.equal(got, msg):
                bad.append("send/recv")
    # a subgroup of the even ranks (a new communicator, as tensor- or pipeline-parallel groups are)
    evens = list(range(0, world, 2))
    group = dist.new_group(evens)
    if rank in evens:
        s = torch.ones(8, device=device)
        dist.all_reduce(s, group=group)
        if not torch.equal(s, torch.full_like(s, float(len(evens)))):
            bad.append("all_reduce on a subgroup")
    return bad


def nccl_library():
    """The file whose ncclAllReduce this process's calls reach: the first
    definition in the global scope, which LD_PRELOAD puts first (Chorus's)
    even when PyTorch also maps its own libnccl.so.2; else the one mapped."""
    try:
        addr = ctypes.cast(ctypes.CDLL(None).ncclAllReduce, ctypes.c_void_p).value
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                lo, hi = (int(v, 16) for v in fields[0].split("-"))
                if lo <= addr < hi and len(fields) > 5:
                    return fields[5]
    except (AttributeError, OSError, ValueError):
        pass  # not in the global scope: PyTorch's own, opened privately
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libnccl.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return "not found"


def main():
    gpu = torch.cuda.is_available() and os.environ.get("EXAMPLES_MEMORY") != "host"
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local % torch.cuda.device_count()) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if gpu else "gloo", device_id=device if gpu else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    if BATCH % world:
        sys.exit("the global batch (64) must divide by the ranks")
    torch.backends.cudnn.deterministic = True
    x, y = make_blobs(torch.Generator().manual_seed(42))
    if rank == 0:
        print(f"pytorch_ddp: {world} ranks on {device.type} ({'NCCL: ' + nccl_library() if gpu else 'Gloo'});"
              f" MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}; global batch {BATCH} = {world} x {BATCH // world}", flush=True)

    model, accuracy = train_ddp(x, y, rank, world, device)
    mine = flat(model)
    theirs = mine.clone()
    dist.broadcast(theirs, src=0)
    wrong = []
    if not torch.equal(mine, theirs):
        wrong.append("weights differ from rank 0's")
    worst = ((mine - flat(train_alone(x, y, device))).abs() / (1 + mine.abs())).max().item()
    if worst > 1e-4:
        wrong.append(f"weights differ from one model trained alone by {worst:.2g}")
    if accuracy < 0.9:
        wrong.append(f"accuracy {100 * accuracy:.1f}% < 90%")
    wrong += [name + " returned wrong data" for name in other_calls(rank, world, device)]

    flags = torch.tensor([len(wrong)], device=device)
    dist.all_reduce(flags)
    for w in wrong:
        print(f"[Rank {rank}] WRONG: {w}", file=sys.stderr, flush=True)
    if rank == 0:
        print(f"largest difference from one model trained alone: {worst:.2g}")
        print("pytorch_ddp: " + ("WRONG (see above)" if flags.item() else "all checks passed"), flush=True)
    dist.destroy_process_group()
    sys.exit(1 if flags.item() else 0)


if __name__ == "__main__":
    main()
