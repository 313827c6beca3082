"""Writes the fsdp.model of a Mixtral-style mixture of experts
(transformers' MixtralForCausalLM from a config, random weights) trained on
its causal-LM loss, imported with fsdp_mlir.from_torch, for the GPU lease
kit's MoE steps (scripts/gpu-bundle.sh):

    mixtral_step.py --hidden 1024 --layers 4 --experts 8 -o mixtral.mlir

--batch is one rank's micro-batch of --seq tokens."""
import argparse

import torch
import transformers

from fsdp_mlir import from_torch
from fsdp_mlir.torch_import import HFLoss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("hidden", 1024), ("ffn", 3584), ("layers", 4),
                          ("heads", 16), ("kv-heads", 8), ("experts", 8),
                          ("top-k", 2), ("vocab", 32000), ("seq", 1024),
                          ("batch", 4)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args()
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=args.vocab, hidden_size=args.hidden,
        intermediate_size=args.ffn, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        num_local_experts=args.experts, num_experts_per_tok=args.top_k,
        max_position_embeddings=args.seq, use_cache=False,
        attn_implementation="sdpa")
    module = HFLoss(transformers.MixtralForCausalLM(config))
    ids = torch.zeros(args.batch, args.seq, dtype=torch.long)
    model = from_torch(module, (ids, ids.clone()), name="mixtral")
    with open(args.output, "w") as f:
        f.write(model.text())


if __name__ == "__main__":
    main()
