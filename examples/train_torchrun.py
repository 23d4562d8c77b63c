"""Distributed training with ringfeed under torchrun (DDP), with exact resume.

    torchrun --nproc_per_node=8 examples/train_torchrun.py \\
        "shards/train-{0000..0099}.tar" --epochs 90 --num-classes 1000

Each process reads its rank's share of every epoch: ringfeed takes RANK,
WORLD_SIZE and LOCAL_WORLD_SIZE from torchrun's environment, every rank draws
the same global order from the seed, and the ranks split it as
DistributedSampler does (so they all see the same number of batches; a
validation loader would pass sampler_drop_last=True, as
DistributedSampler(drop_last=True), so that no image counts twice). The
checkpoint holds the loader's state_dict (epoch and next batch): a job that
is killed and started again continues on exactly the batches it would have
seen, whatever num_workers it runs with. Works on CPU (gloo) and on GPUs
(nccl); --max-steps stops early, as a preemption would.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import ringfeed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="tar shards (pattern or glob), image folder or list file")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64, help="per rank")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--checkpoint", default="checkpoint.pt")
    ap.add_argument("--save-every", type=int, default=100, help="steps between checkpoints")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no)")
    a = ap.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)

    # rank / world_size / local_world_size default to RANK / WORLD_SIZE / LOCAL_WORLD_SIZE.
    loader = ringfeed.Loader(a.source, batch_size=a.batch_size, image_size=a.image_size,
                             transform="random_resized_crop", layout="NCHW", seed=0,
                             device=str(device), num_workers=0)  # 0: the tuner picks

    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, a.num_classes)).to(device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    start_epoch, resumed = 0, False
    if os.path.exists(a.checkpoint):
        ck = torch.load(a.checkpoint, map_location="cpu")
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        # Every rank stands at the same (epoch, batch): rank 0's state fits all.
        loader.load_state_dict(ck["loader"])
        start_epoch, resumed = ck["loader"]["epoch"], True
        if rank == 0:
            print("resumed at epoch %d batch %d" % (start_epoch, ck["loader"]["batch"]))

    def save():
        if rank == 0:
            tmp = a.checkpoint + ".tmp"
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                        "loader": loader.state_dict()}, tmp)
            os.replace(tmp, a.checkpoint)  # never a half-written checkpoint
        dist.barrier()

    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    step = 0
    for epoch in range(start_epoch, a.epochs):
        if not (resumed and epoch == start_epoch):
            loader.set_epoch(epoch)  # the order of each epoch derives from (seed, epoch)
        for images, labels in loader:  # uint8 [B,3,S,S], int64 [B]
            x = (images.to(device, non_blocking=True).float() - mean) / std
            y = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if rank == 0 and step % 10 == 0:
                print("epoch %d step %d loss %.3f" % (epoch, step, loss.item()))
            if step % a.save_every == 0 or step == a.max_steps:
                save()  # state_dict() after the batch: resume starts with the next one
            if step == a.max_steps:
                break
        if step == a.max_steps:
            break
    else:
        save()
    if rank == 0:
        s = loader.stats()
        print("done: %d steps; %.0f images/s, stalled %.1f s, %d workers, io %s"
              % (step, s["images_per_sec"], s["stall_seconds"], s["num_workers"],
                 s["io_backend"]))
    loader.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
