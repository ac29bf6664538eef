"""A tiny random-weight llama GGUF (a few hundred KB) written at test time with `gguf`.

It loads in milliseconds and runs the real llama.cpp loading, tokenizing, sampling and streaming
path. Its vocabulary is the 256 bytes plus ChatML's control tokens, and it has a ChatML chat
template. The output rows of the control tokens and of non-printable bytes are zero, so their
logits sit far below the printable ones: the model never ends its reply by itself and writes
only printable ASCII, which makes length and cancellation tests deterministic.
"""

from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CONTROL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]


def write_tiny_gguf(path: Path, *, dim: int = 64, layers: int = 2, seed: int = 0) -> Path:
    import gguf
    import numpy as np

    vocab = _CONTROL + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN] + [gguf.TokenType.CONTROL] * 4 + [gguf.TokenType.BYTE] * 256
    ff = dim * 2
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-random")
    # xllamacpp caps a model's window at this: room for the recording test's conversation.
    writer.add_context_length(8192)
    writer.add_embedding_length(dim)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(4)
    writer.add_head_count_kv(4)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(dim // 4)
    writer.add_tokenizer_model("llama")
    writer.add_add_space_prefix(False)
    writer.add_token_list(vocab)
    writer.add_token_scores([0.0] * len(vocab))
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(4)  # <|im_end|>, as in ChatML models
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)

    rng = np.random.default_rng(seed)

    def weights(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    output = weights(len(vocab), dim, scale=1.0)
    printable = {len(_CONTROL) + b for b in range(32, 127)}
    for token in range(len(vocab)):
        if token not in printable:
            output[token] = 0.0
    writer.add_tensor("token_embd.weight", weights(len(vocab), dim, scale=1.0))
    writer.add_tensor("output_norm.weight", np.ones(dim, np.float32))
    writer.add_tensor("output.weight", output)
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(dim, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(dim, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weights(dim, dim))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weights(ff, dim))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weights(ff, dim))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weights(dim, ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
