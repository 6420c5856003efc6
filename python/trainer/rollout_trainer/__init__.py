"""A trainer on rollout-pipeline's exported samples (issue 24 §2), in steps:

- `policy_model.load_policy(gguf)`: the model the inference server runs, from the same GGUF
  (transformers dequantizes it), in float32 on the CPU;
- `mismatch.measure(model, samples)`: the trainer's log probability of every generated token
  against the one the server reported when it sampled it (mean k3 KL, mean and max |delta|).

    python -m rollout_trainer.mismatch --samples export.jsonl --gguf model.gguf
"""
