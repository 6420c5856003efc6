"""A trainer on rollout-pipeline's exported samples (issue 24 §2), in steps:

- `policy_model.load_policy(gguf)`: the model the inference server runs, from the same GGUF
  (transformers dequantizes it), in float32 on the CPU;
- `mismatch.measure(model, samples)`: the trainer's log probability of every generated token
  against the one the server reported when it sampled it (mean k3 KL, mean and max |delta|);
- `grpo.grpo_step(model, samples)`: one clipped GRPO step on a LoRA, against the server's logprobs
  as the old policy's; `grpo.save` / `grpo.resume` keep the trainer's state between steps;
- `adapter_gguf.convert_adapter(...)`: the LoRA in llama.cpp's GGUF adapter format, by llama.cpp's
  own converter, for the server to load (client/training/weightSync.ts restarts it with it).

    python -m rollout_trainer.mismatch --samples export.jsonl --gguf model.gguf
    python -m rollout_trainer.grpo --samples export.jsonl --gguf model.gguf --out DIR --convert [--resume DIR]
"""
