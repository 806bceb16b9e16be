"""A tiny training job for `spindle train --src-dir examples/train -- python3 train.py`.

Each worker prints the rank environment Spindle gives it, "trains" for a few steps, and rank 0
writes a checkpoint to SPINDLE_CHECKPOINT_DIR when one is given. No GPU or framework needed:
replace the loop with torch.distributed (init_method="env://") for a real job.
"""

import json
import os
import time

import model  # shipped beside train.py: --src-dir carries the whole directory

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
print(
    f"rank {rank} of {world}: local rank {os.environ.get('LOCAL_RANK')}, "
    f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}, "
    f"GPUs {os.environ.get('CUDA_VISIBLE_DEVICES', '(none)')}",
    flush=True,
)
weights = model.init(seed=rank)
for step in range(1, 4):
    weights = model.step(weights)
    print(f"rank {rank} step {step} loss {model.loss(weights):.4f}", flush=True)
    time.sleep(0.2)
ckpt = os.environ.get("SPINDLE_CHECKPOINT_DIR")
if ckpt and rank == 0:
    os.makedirs(ckpt, exist_ok=True)
    with open(os.path.join(ckpt, "step-3.json"), "w") as f:
        json.dump({"step": 3, "weights": weights}, f)
print(f"rank {rank} done", flush=True)
