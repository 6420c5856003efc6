"""llama.cpp's own HTTP server (PyPI xllamacpp) serving one GGUF model on 127.0.0.1.

Started by servers/inference/llamaServer.ts; runs until SIGTERM or SIGINT. It prints one JSON
line on stdout once the server listens: {"event": "listening", "baseUrl": ..., "template": ...}.

Chat template (--template):
  gguf             the template inside the GGUF, as is.
  gguf-fenced-json the GGUF's template with its <tool_call> tags replaced by a ```json fence in
                   the three places Qwen2.5's template has them (the instruction, its example and
                   the rendering of earlier calls). Qwen2.5-Coder-0.5B writes calls as fenced JSON
                   whatever the prompt says; with the tags in the template llama.cpp's parser
                   looks for tags and hands the call back as plain content, with the fence it
                   returns proper tool_calls. Derived from the GGUF at start, never a copied blob.
  FILE             a Jinja template read from FILE.
The template used is written to --template-out and its sha256 is in the "listening" line.

--lora FILE applies a LoRA adapter in llama.cpp's GGUF format (what rollout_trainer.adapter_gguf makes
from a trained PEFT adapter) at scale 1 on top of the model; the "listening" line names it and its
sha256. llama.cpp refuses an adapter made for another model at start-up: the launcher then exits.
"""

import argparse
import hashlib
import json
import os
import signal
import struct
import sys
import time

# GGUF metadata value types (ggml's gguf.h) and the struct format of the fixed-size ones.
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def gguf_string_field(path, wanted):
    """The string value of metadata key `wanted` in a GGUF file, or None; reads only the header."""
    with open(path, "rb") as f:
        def read(fmt):
            size = struct.calcsize("<" + fmt)
            data = f.read(size)
            if len(data) != size:
                raise ValueError(f"{path}: truncated GGUF header")
            return struct.unpack("<" + fmt, data)[0]

        def read_str():
            return f.read(read("Q")).decode("utf-8")

        def skip(vtype):
            if vtype in _FIXED:
                f.seek(struct.calcsize("<" + _FIXED[vtype]), 1)
            elif vtype == _STRING:
                f.seek(read("Q"), 1)
            elif vtype == _ARRAY:
                itype, count = read("I"), read("Q")
                if itype in _FIXED:
                    f.seek(struct.calcsize("<" + _FIXED[itype]) * count, 1)
                else:
                    for _ in range(count):
                        skip(itype)
            else:
                raise ValueError(f"{path}: unknown GGUF value type {vtype}")

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (no GGUF magic)")
        version = read("I")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is too old (need >= 2)")
        read("Q")  # tensor count
        for _ in range(read("Q")):
            key = read_str()
            vtype = read("I")
            if key == wanted and vtype == _STRING:
                return read_str()
            skip(vtype)
    return None


# (what the GGUF's template says, what the fenced variant says instead), in the order applied.
FENCE_REPLACEMENTS = [
    ("within <tool_call></tool_call> XML tags", "within a ```json fenced code block"),
    ("<tool_call>", "```json"),
    ("</tool_call>", "```"),
]


def fenced_json_template(template, model_path):
    for old, _ in FENCE_REPLACEMENTS:
        if old not in template:
            raise SystemExit(
                f"llama_server: the chat template in {model_path} has no {old!r}, so the gguf-fenced-json fix does not "
                "apply to this model; start it with --template gguf, or give a template file"
            )
    places = template.count("<tool_call>")
    for old, new in FENCE_REPLACEMENTS:
        template = template.replace(old, new)
    return template, places


def resolve_template(mode, model_path):
    if mode in ("gguf", "gguf-fenced-json"):
        template = gguf_string_field(model_path, "tokenizer.chat_template")
        if template is None:
            raise SystemExit(f"llama_server: {model_path} carries no tokenizer.chat_template; give --template FILE")
        if mode == "gguf":
            return template, {"source": "gguf"}
        fenced, places = fenced_json_template(template, model_path)
        return fenced, {"source": "gguf-fenced-json", "tagsReplaced": places}
    try:
        with open(mode, encoding="utf-8") as f:
            return f.read(), {"source": "file", "path": mode}
    except OSError as err:
        raise SystemExit(f"llama_server: --template {mode!r} is neither gguf, gguf-fenced-json nor a readable file: {err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="path of the GGUF file")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ctx", type=int, default=8192, help="context size shared by all slots")
    ap.add_argument("--parallel", type=int, default=2, help="slots (requests served at once)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--template", default="gguf-fenced-json")
    ap.add_argument("--template-out", help="write the template used to this file")
    ap.add_argument("--lora", help="a LoRA adapter GGUF to apply at scale 1")
    args = ap.parse_args()

    import xllamacpp  # after argument parsing, so --help works without it

    template, template_info = resolve_template(args.template, args.model)
    template_info["sha256"] = hashlib.sha256(template.encode("utf-8")).hexdigest()
    if args.template_out:
        with open(args.template_out, "w", encoding="utf-8") as f:
            f.write(template)
        template_info["file"] = args.template_out

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True
    params.chat_template = template
    # The load the pipeline admits policy calls by (policies/admission/): /slots is on by
    # default; /metrics (requests processing and deferred, KV cache usage) is not.
    params.endpoint_slots = True
    params.endpoint_metrics = True
    lora = None
    if args.lora:
        if not os.path.isfile(args.lora):
            raise SystemExit(f"llama_server: --lora {args.lora!r} is not a file")
        with open(args.lora, "rb") as f:
            lora = {"path": args.lora, "sha256": hashlib.sha256(f.read()).hexdigest()}
        params.lora_adapters = [xllamacpp.CommonAdapterLoraInfo(args.lora, 1.0)]

    # SIGTERM/SIGINT are taken by sigwait below, not by Python's default handlers.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    started = time.monotonic()
    server = xllamacpp.Server(params)
    print(
        json.dumps(
            {
                "event": "listening",
                "baseUrl": f"{server.listening_address}/v1",
                "loadSeconds": round(time.monotonic() - started, 3),
                "xllamacpp": xllamacpp.__version__,
                "template": template_info,
                "lora": lora,
            }
        ),
        flush=True,
    )
    sig = signal.sigwait([signal.SIGTERM, signal.SIGINT])
    print(json.dumps({"event": "stopping", "signal": signal.Signals(sig).name}), flush=True)
    # Exit at once: the server keeps no state worth flushing, and its destructor can wait forever on
    # the HTTP thread blocked in accept() (seen here), which would leave the process up after SIGTERM.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
