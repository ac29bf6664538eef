#!/usr/bin/env bash
# Install a portable build of llama-cpp-python (the engine of ipyagent's local model).
#
#   scripts/install-llama-cpp.sh [PYTHON]      # default: .venv/bin/python, else python3
#
# Why: PyPI has only the source of llama-cpp-python, and its default build compiles for the
# build machine's CPU (-march=native); on Xeons with AMX that build crashes on the first
# decode. This one targets AVX2/FMA/F16C, which runs on any x86-64 CPU from the last decade, and
# leaves out what the bindings do not use here (see scripts/llama-cpp-lean.cmake).
#
# Idempotent: when the Python already has a llama-cpp-python that loads a model and generates
# (checked in a child process, so a crashing build is detected rather than fatal), nothing is
# done. Wheels are built once into $IPYAGENT_WHEEL_DIR (default ~/.cache/ipyagent/wheels) and
# reinstalled from there; pip's own wheel cache is not used for the build, because it is keyed by
# version only and may hold a native build that crashes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:-}"
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
version="${LLAMA_CPP_VERSION:-0.3.36}"
flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# Lean: without llava/mtmd (images) and llama.cpp's `common` library, neither of which the
# bindings use here: the build takes 5 minutes on 2 cores instead of 12.
flags="$flags -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$root/scripts/llama-cpp-lean.cmake"
wheels="${IPYAGENT_WHEEL_DIR:-$HOME/.cache/ipyagent/wheels}/portable-avx2-lean"
pip=("$python" -m pip --disable-pip-version-check)
source "$root/scripts/_pip.sh"

# Loads a tiny random-weight model (written with the gguf package) and generates a few tokens.
smoke_test() {
  "$python" - <<'EOF'
import os, sys, tempfile
import numpy as np
import gguf, llama_cpp

d, ff, vocab = 32, 64, ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
path = os.path.join(tempfile.mkdtemp(), "smoke.gguf")
w = gguf.GGUFWriter(path, "llama")
w.add_context_length(512); w.add_embedding_length(d); w.add_block_count(1)
w.add_feed_forward_length(ff); w.add_head_count(2); w.add_head_count_kv(2)
w.add_layer_norm_rms_eps(1e-5); w.add_rope_dimension_count(d // 2)
w.add_tokenizer_model("llama"); w.add_token_list(vocab)
w.add_token_scores([0.0] * len(vocab)); w.add_token_types([2, 3, 3] + [6] * 256)
w.add_bos_token_id(1); w.add_eos_token_id(2)
rng = np.random.default_rng(0)
t = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.1
w.add_tensor("token_embd.weight", t(len(vocab), d)); w.add_tensor("output_norm.weight", np.ones(d, np.float32))
w.add_tensor("output.weight", t(len(vocab), d))
for n in ("attn_norm", "ffn_norm"): w.add_tensor(f"blk.0.{n}.weight", np.ones(d, np.float32))
for n in ("attn_q", "attn_k", "attn_v", "attn_output"): w.add_tensor(f"blk.0.{n}.weight", t(d, d))
w.add_tensor("blk.0.ffn_gate.weight", t(ff, d)); w.add_tensor("blk.0.ffn_up.weight", t(ff, d))
w.add_tensor("blk.0.ffn_down.weight", t(d, ff))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
llm = llama_cpp.Llama(model_path=path, n_ctx=128, n_threads=1, verbose=False)
out = llm.create_completion("hello", max_tokens=4)
print(f"llama-cpp-python {llama_cpp.__version__} works", file=sys.stderr)
EOF
}

quiet_pip "${pip[@]}" install --quiet "gguf>=0.10" numpy
if "$python" -c "import llama_cpp" 2>/dev/null && smoke_test; then
  exit 0
fi

wheel="$(ls "$wheels"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  cores="$(nproc 2>/dev/null || echo 2)"
  expected=$(( 600 / cores > 120 ? 600 / cores : 120 ))  # measured: 5 min on 2 cores
  mkdir -p "$wheels"
  log="$wheels/build.log"
  echo "Building llama.cpp for the embedded model, once (about $(( expected / 60 )) min on $cores cores;" \
       "later installs reuse it). Log: $log" >&2
  CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$cores" \
    "${pip[@]}" wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$wheels" "llama-cpp-python==$version" > "$log" 2>&1 &
  builder=$!
  started=$SECONDS
  while kill -0 "$builder" 2>/dev/null; do
    sleep 1
    elapsed=$(( SECONDS - started ))
    line="  building llama.cpp: $(( elapsed / 60 ))m$(printf %02d $(( elapsed % 60 )))s of about $(( expected / 60 ))m"
    if [ -t 2 ]; then printf '\r%s' "$line" >&2; elif (( elapsed % 30 == 0 )); then echo "$line" >&2; fi
  done
  [ -t 2 ] && echo >&2
  if ! wait "$builder"; then
    tail -n 40 "$log" >&2
    echo "Building llama-cpp-python failed (the whole log: $log). It needs gcc, g++ and cmake." >&2
    exit 1
  fi
  echo "  built in $(( (SECONDS - started) / 60 ))m$(printf %02d $(( (SECONDS - started) % 60 )))s" >&2
  wheel="$(ls "$wheels"/llama_cpp_python-"$version"-*.whl | head -n1)"
fi
"${pip[@]}" install --force-reinstall --no-deps "$wheel"
quiet_pip "${pip[@]}" install "$wheel"  # its dependencies
if ! smoke_test; then
  echo "llama-cpp-python was installed from $wheel but crashes; delete that wheel and re-run." >&2
  exit 1
fi
