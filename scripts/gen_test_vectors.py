#!/usr/bin/env python3
# Regenerates the float64 test vectors that tests/model/test_vectors.cpp and
# tests/tokenizer/spm_models_test.cpp compare against:
#   stories260K.testvectors.json, TinyStories-656K.testvectors.json
# The checked-in copies sit beside the models in ../shared/models. They were
# computed outside this project by whoever assembled that folder (its
# README.md says how); this script recomputes them here from the model files
# alone, with a GGUF / safetensors reader and a Llama forward pass of its own
# in float64 numpy, so the expectations can be checked and regenerated.
#
# Run from the repository root (Debian's python3-numpy; no pip packages):
#   apt-get install python3-numpy
#   /usr/bin/python3 scripts/gen_test_vectors.py --check         # compare with ../shared/models
#   /usr/bin/python3 scripts/gen_test_vectors.py -o OUTDIR       # write the JSON files to OUTDIR
# --models DIR picks another models folder. --check exits 1 when an id,
# piece or string differs, or a number by more than the printing precision
# (the files round to 6 decimals). About a minute on one core.
#
# What is computed (llama2.c / llama.cpp semantics; HF semantics for the
# safetensors): RMSNorm with the file's eps, RoPE theta 10000 (adjacent pairs
# for the GGUFs, whose converters permuted Q/K so; rotate_half for the HF
# safetensors), grouped-query attention, SwiGLU, the classifier tied to the
# embedding where the file has no output.weight. Greedy argmax from BOS.
import argparse
import hashlib
import json
import pathlib
import struct
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_MODELS = ROOT.parent / "shared" / "models"

# ---- GGUF ----------------------------------------------------------------------

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
F32, F16, Q8_0 = 0, 1, 8


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def unpack(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.unpack("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, t):
        if t == GGUF_STRING:
            return self.string()
        if t == GGUF_ARRAY:
            et, n = self.unpack("<I"), self.unpack("<Q")
            return [self.value(et) for _ in range(n)]
        return self.unpack(GGUF_SCALARS[t])


def read_gguf(path):
    """(metadata dict, {name: float64 array shaped [ne1, ne0] or [ne0]})."""
    data = pathlib.Path(path).read_bytes()
    r = Reader(data)
    assert data[:4] == b"GGUF", path
    r.pos = 4
    version = r.unpack("<I")
    assert version in (2, 3), f"{path}: GGUF v{version}"
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.unpack("<Q") for _ in range(r.unpack("<I"))]
        infos.append((name, dims, r.unpack("<I"), r.unpack("<Q")))
    align = meta.get("general.alignment", 32)
    base = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, ttype, offset in infos:
        n = int(np.prod(dims))
        start = base + offset
        if ttype == F32:
            x = np.frombuffer(data, "<f4", n, start).astype(np.float64)
        elif ttype == F16:
            x = np.frombuffer(data, "<f2", n, start).astype(np.float64)
        elif ttype == Q8_0:  # blocks of 32: f16 scale, 32 x int8
            blocks = np.frombuffer(data, np.dtype([("d", "<f2"), ("q", "i1", 32)]), n // 32, start)
            x = (blocks["d"].astype(np.float64)[:, None] * blocks["q"].astype(np.float64)).reshape(-1)
        else:
            raise SystemExit(f"{path}: tensor {name} has type {ttype}, which this script does not decode")
        tensors[name] = x.reshape(list(reversed(dims)))
    return meta, tensors


def read_safetensors(path):
    data = pathlib.Path(path).read_bytes()
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data, "<f4", (b - a) // 4, 8 + n + a).astype(np.float64).reshape(t["shape"])
    return out


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


# ---- the model -----------------------------------------------------------------


class Llama:
    """Weights as [out, in] float64 matrices; step() runs one token, keeping a KV cache."""

    def __init__(self, emb, out, out_norm, layers, n_head, n_head_kv, eps, theta, rope_halves):
        self.emb, self.out, self.out_norm, self.layers = emb, out, out_norm, layers
        self.n_head, self.n_head_kv, self.eps = n_head, n_head_kv, eps
        self.hd = emb.shape[1] // n_head
        self.inv_freq = theta ** (-np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        self.rope_halves = rope_halves
        self.reset()

    def reset(self):
        self.k = [[] for _ in self.layers]
        self.v = [[] for _ in self.layers]

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x) + self.eps) * w

    def rope(self, x, pos):  # x: [heads, hd]
        c, s = np.cos(pos * self.inv_freq), np.sin(pos * self.inv_freq)
        if self.rope_halves:  # HF rotate_half: pairs (j, j + hd/2)
            a, b = x[:, :self.hd // 2], x[:, self.hd // 2:]
        else:  # adjacent pairs (2j, 2j+1)
            a, b = x[:, 0::2], x[:, 1::2]
        ra, rb = a * c - b * s, a * s + b * c
        y = np.empty_like(x)
        if self.rope_halves:
            y[:, :self.hd // 2], y[:, self.hd // 2:] = ra, rb
        else:
            y[:, 0::2], y[:, 1::2] = ra, rb
        return y

    def step(self, token):
        x = self.emb[token].copy()
        pos = len(self.k[0])
        group = self.n_head // self.n_head_kv
        for i, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["attn_norm"])
            q = self.rope((L["wq"] @ h).reshape(self.n_head, self.hd), pos)
            self.k[i].append(self.rope((L["wk"] @ h).reshape(self.n_head_kv, self.hd), pos))
            self.v[i].append((L["wv"] @ h).reshape(self.n_head_kv, self.hd))
            keys, values = np.stack(self.k[i]), np.stack(self.v[i])  # [pos+1, kv heads, hd]
            att = np.empty((self.n_head, self.hd))
            for hq in range(self.n_head):
                scores = keys[:, hq // group, :] @ q[hq] / np.sqrt(self.hd)
                p = np.exp(scores - scores.max())
                att[hq] = (p / p.sum()) @ values[:, hq // group, :]
            x = x + L["wo"] @ att.reshape(-1)
            h = self.rmsnorm(x, L["ffn_norm"])
            g = L["w_gate"] @ h
            x = x + L["w_down"] @ (g / (1.0 + np.exp(-g)) * (L["w_up"] @ h))
        return self.out @ self.rmsnorm(x, self.out_norm)


def llama_from_gguf(path):
    meta, t = read_gguf(path)
    arch = meta["general.architecture"]
    layers = []
    for l in range(meta[f"{arch}.block_count"]):
        p = f"blk.{l}."
        layers.append({"attn_norm": t[p + "attn_norm.weight"], "wq": t[p + "attn_q.weight"], "wk": t[p + "attn_k.weight"],
                       "wv": t[p + "attn_v.weight"], "wo": t[p + "attn_output.weight"], "ffn_norm": t[p + "ffn_norm.weight"],
                       "w_gate": t[p + "ffn_gate.weight"], "w_up": t[p + "ffn_up.weight"], "w_down": t[p + "ffn_down.weight"]})
    n_head = meta[f"{arch}.attention.head_count"]
    model = Llama(t["token_embd.weight"], t.get("output.weight", t["token_embd.weight"]), t["output_norm.weight"], layers,
                  n_head, meta.get(f"{arch}.attention.head_count_kv", n_head),
                  meta[f"{arch}.attention.layer_norm_rms_epsilon"], meta.get(f"{arch}.rope.freq_base", 10000.0),
                  rope_halves=False)
    return meta, model


def llama_from_hf(folder):
    cfg = json.loads((folder / "config.json").read_text())
    t = read_safetensors(folder / "model.safetensors")
    emb = t.get("model.embed_tokens.weight", t["lm_head.weight"])  # tied: only lm_head is stored
    layers = []
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        layers.append({"attn_norm": t[p + "input_layernorm.weight"], "wq": t[p + "self_attn.q_proj.weight"],
                       "wk": t[p + "self_attn.k_proj.weight"], "wv": t[p + "self_attn.v_proj.weight"],
                       "wo": t[p + "self_attn.o_proj.weight"], "ffn_norm": t[p + "post_attention_layernorm.weight"],
                       "w_gate": t[p + "mlp.gate_proj.weight"], "w_up": t[p + "mlp.up_proj.weight"],
                       "w_down": t[p + "mlp.down_proj.weight"]})
    return Llama(emb, t["lm_head.weight"], t["model.norm.weight"], layers, cfg["num_attention_heads"],
                 cfg["num_key_value_heads"], cfg["rms_norm_eps"], cfg["rope_theta"], rope_halves=True)


# ---- tokenizer (SentencePiece-style, as the vectors' "encode" field says) -------


def spm_encode(text, pieces, scores):
    """Prepend U+2581, spaces -> U+2581, one symbol per character (byte fallback
    <0xXX> when the character is no piece), then merge the adjacent pair whose
    concatenation is the highest-scoring piece, leftmost on ties, until none is."""
    if not text:
        return []
    index = {p: i for i, p in enumerate(pieces)}
    ids = []
    for ch in "\u2581" + text.replace(" ", "\u2581"):
        if ch in index:
            ids.append(index[ch])
        else:
            ids += [index[f"<0x{b:02X}>"] for b in ch.encode("utf-8")]
    while True:
        best, best_score = None, -1e10
        for i in range(len(ids) - 1):
            j = index.get(pieces[ids[i]] + pieces[ids[i + 1]])
            if j is not None and scores[j] > best_score:
                best, best_score = (i, j), scores[j]
        if best is None:
            return ids
        ids[best[0]:best[0] + 2] = [best[1]]


def decode(ids, pieces, strip_first_space):
    """Pieces with U+2581 as a space and <0xXX> as that byte; the first piece's
    leading space dropped (llama2.c after BOS, HF's Strip decoder)."""
    out = bytearray()
    for n, i in enumerate(ids):
        p = pieces[i]
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            out.append(int(p[3:5], 16))
            continue
        s = p.replace("\u2581", " ")
        if n == 0 and strip_first_space and s.startswith(" "):
            s = s[1:]
        out += s.encode("utf-8")
    return out.decode("utf-8", errors="replace")


# ---- the vectors -----------------------------------------------------------------


def rounded(logits):
    return [round(float(v), 6) for v in logits]


def greedy_from_bos(model, bos, steps, stop):
    """ids after BOS and each step's max logit; stops after producing `stop`."""
    model.reset()
    ids, maxes, token = [], [], bos
    for _ in range(steps):
        logits = model.step(token)
        token = int(np.argmax(logits))
        ids.append(token)
        maxes.append(round(float(logits.max()), 5))
        if token == stop:
            break
    return ids, maxes


def stories260k(models):
    path = models / "stories260K.gguf"
    meta, model = llama_from_gguf(path)
    pieces, scores = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.scores"]
    bos = meta["tokenizer.ggml.bos_token_id"]
    ids, maxes = greedy_from_bos(model, bos, 256, bos)  # llama2.c: stop on BOS
    model.reset()
    logits0 = model.step(bos)

    prompt = "Lily and Tom went to the zoo."
    prompt_ids = spm_encode(prompt, pieces, scores)
    model.reset()
    for t in [bos] + prompt_ids:
        logits = model.step(t)
    last_prompt_logits = logits
    cont = []
    for _ in range(65):  # the argmax after the prompt, then 64 decode steps
        cont.append(int(np.argmax(logits)))
        logits = model.step(cont[-1])
    encode_texts = ["Once upon a time", "Hello world", "  two spaces", "The cat sat on the mat.\nThe end.",
                    "\U0001F600 \u00DCn\u00EFcode", ""]
    return {
        "model": path.name,
        "model_sha256": sha256(path),
        "how": "llama2.c run.c semantics: start from BOS id 1 at pos 0, empty prompt, greedy argmax, 256 steps "
               "(= positions 0..255), stop early on BOS; computed in float64 by a pure-Python reference forward pass "
               "(RMSNorm eps from GGUF, RoPE theta 10000 on adjacent pairs, GQA 8q/4kv heads, SwiGLU, tied classifier)",
        "bos_id": bos,
        "steps": 256,
        "greedy_ids": ids,
        "greedy_text": decode(ids, pieces, strip_first_space=True),
        "greedy_max_logit_per_step": maxes,
        "logits_after_bos_pos0": rounded(logits0),
        "prompt_test": {
            "prompt": prompt,
            "encode": "SentencePiece-style: prepend U+2581, spaces->U+2581, score-driven bigram merges (leftmost on "
                      "ties), byte fallback <0xXX>; no BOS in prompt_ids (prepend bos_id 1 when running)",
            "prompt_ids": prompt_ids,
            "prompt_pieces": [pieces[i] for i in prompt_ids],
            "greedy_continuation_ids_64": cont,
            "greedy_continuation_text": decode(cont, pieces, strip_first_space=False),
            "logits_after_last_prompt_token": rounded(last_prompt_logits),
        },
        "encode_tests": [{"text": s, "ids": spm_encode(s, pieces, scores)} for s in encode_texts],
    }


def tinystories_656k(models):
    hf_dir = models / "TinyStories-656K"
    f16_path, q8_path = models / "TinyStories-656K.f16.gguf", models / "tinystories-656k-q8_0.gguf"
    f32 = llama_from_hf(hf_dir)
    meta, f16 = llama_from_gguf(f16_path)
    _, q8 = llama_from_gguf(q8_path)
    pieces = meta["tokenizer.ggml.tokens"]
    bos, eos = 1, 2  # <|start_story|>, <|end_story|>
    ids, maxes = greedy_from_bos(f32, bos, 128, eos)
    ids_f16, _ = greedy_from_bos(f16, bos, 128, eos)
    ids_q8, _ = greedy_from_bos(q8, bos, 128, eos)
    for m in (f32, f16, q8):
        m.reset()
    l_f32, l_f16, l_q8 = f32.step(bos), f16.step(bos), q8.step(bos)
    agree = next((i for i, (a, b) in enumerate(zip(ids, ids_q8)) if a != b), min(len(ids), len(ids_q8)))
    return {
        "model": "TinyStories-656K (raincandy-u)",
        # The safetensors' folder is TinyStories-656K/ in ../shared/models; the key keeps the vectors' label.
        "files": {"TinyStories-656K-F32/model.safetensors": sha256(hf_dir / "model.safetensors"),
                  f16_path.name: sha256(f16_path), q8_path.name: sha256(q8_path)},
        "how": "start from BOS id 1 (<|start_story|>) at pos 0, greedy argmax, up to 128 steps, stop after EOS id 2 "
               "(<|end_story|>). float64 pure-Python reference: HF LlamaForCausalLM semantics for the safetensors "
               "(rotate_half RoPE, theta 10000, RMSNorm eps 1e-6, GQA 8q/4kv, head_dim 16, SwiGLU, tied lm_head); the "
               "GGUFs run with adjacent-pair RoPE on llama.cpp-permuted Q/K and give the same numbers (F16 is lossless "
               "here: the original weights are bf16 values that f16 represents exactly).",
        "greedy_ids_f32_and_f16": ids,
        "f16_gguf_greedy_identical_to_f32": ids_f16 == ids,
        "greedy_text": decode(ids, pieces, strip_first_space=True),
        "greedy_max_logit_per_step_f32": maxes,
        "logits_after_bos_pos0_f32": rounded(l_f32),
        "max_abs_diff_pos0_logits_f16_vs_f32": float(np.max(np.abs(l_f16 - l_f32))),
        "greedy_ids_q8_0": ids_q8,
        "q8_0_agrees_with_f32_for_first_n_tokens": agree,
        "logits_after_bos_pos0_q8_0": rounded(l_q8),
    }


# ---- output and checks -------------------------------------------------------------

# Fields that are float64 rounding noise, not expectations: any value this small is right.
NOISE_FIELDS = {"max_abs_diff_pos0_logits_f16_vs_f32": 1e-12}


def compare(expect, got, where, problems):
    if isinstance(expect, dict) and isinstance(got, dict):
        if list(expect) != list(got):
            problems.append(f"{where}: keys {list(expect)} != {list(got)}")
        for k in expect:
            if k in got:
                compare(expect[k], got[k], f"{where}.{k}", problems)
    elif isinstance(expect, list) and isinstance(got, list):
        if len(expect) != len(got):
            problems.append(f"{where}: {len(expect)} entries, regenerated {len(got)}")
        for i, (a, b) in enumerate(zip(expect, got)):
            compare(a, b, f"{where}[{i}]", problems)
    elif isinstance(expect, float) and isinstance(got, float):
        key = where.rsplit(".", 1)[-1]
        if key in NOISE_FIELDS:
            if abs(got) > NOISE_FIELDS[key] or abs(expect) > NOISE_FIELDS[key]:
                problems.append(f"{where}: {expect} / {got} above {NOISE_FIELDS[key]}")
        elif abs(expect - got) > 1.5e-6:  # both rounded to 6 decimals
            problems.append(f"{where}: {expect} != {got}")
    elif type(expect) is not type(got) or expect != got:
        problems.append(f"{where}: {expect!r} != {got!r}")


# File name -> (generator, json.dumps keyword arguments that reproduce the checked-in bytes).
VECTORS = {
    "stories260K.testvectors.json": (stories260k, {"indent": 1}),
    "TinyStories-656K.testvectors.json": (tinystories_656k, {"indent": 1, "ensure_ascii": False}),
}


def main():
    parser = argparse.ArgumentParser(description="Regenerate or check the float64 test vectors.")
    parser.add_argument("--models", type=pathlib.Path, default=DEFAULT_MODELS, help="the models folder")
    parser.add_argument("-o", "--output", type=pathlib.Path, help="write the JSON files into this folder")
    parser.add_argument("--check", action="store_true", help="compare with the files in the models folder")
    args = parser.parse_args()
    if not args.check and not args.output:
        parser.error("give --check, -o OUTDIR or both")
    failed = False
    for name, (generate, dump_args) in VECTORS.items():
        vectors = generate(args.models)
        text = json.dumps(vectors, **dump_args)
        if args.output:
            args.output.mkdir(parents=True, exist_ok=True)
            (args.output / name).write_text(text, encoding="utf-8")
            print(f"wrote {args.output / name}")
        if args.check:
            old_text = (args.models / name).read_text(encoding="utf-8")
            problems = []
            compare(json.loads(old_text), json.loads(text), name, problems)
            same = "byte-identical" if old_text == text else "equal within the printing precision"
            print(f"{name}: " + (f"{len(problems)} differences" if problems else same))
            for p in problems[:40]:
                print("  " + p)
            failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
