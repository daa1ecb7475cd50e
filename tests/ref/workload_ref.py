#!/usr/bin/env python3
"""Independent check of the workload stage on a ChatML model (SmolLM2).

Rebuilds the rendered text from the transcript by the rules documented in docs/workloads.md
(tools listed in the system message, tool calls as <tool_call>{...}</tool_call> in the content,
tool results in the "tool" role) and decodes every span's tokens through the token strings stored
in the GGUF file (GPT-2 byte-level BPE), without llama.cpp.

    workload_ref.py --session S.json --gguf M.gguf --text T.txt --tokens T.json --spans S.json
Exits 0 when the text, the tokens and every span agree; prints the first disagreements otherwise.
"""

import argparse
import json
import sys

import gguf

LISTING_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
LISTING_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>{\"name\": <function-name>, \"arguments\": "
                "<args-json-object>}</tool_call>")


def dumps(x):
    return json.dumps(x, ensure_ascii=False)


def call_text(call):
    args = call["function"]["arguments"]
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return "<tool_call>" + dumps({"name": call["function"]["name"], "arguments": args}) + "</tool_call>"


def render(doc):
    """The ChatML chunk of every message, and the text of every tool call."""
    tools = doc.get("tools") or []
    msgs = doc["messages"]
    assert msgs[0]["role"] == "system", "the reference expects a system message first"
    chunks, calls = [], []
    for i, m in enumerate(msgs):
        content = m.get("content") or ""
        if i == 0 and tools:
            content += ("\n\n" if content else "") + LISTING_HEAD + "".join("\n" + dumps(t) for t in tools) + LISTING_TAIL
        parts = [content] if content else []
        for c in m.get("tool_calls") or []:
            parts.append(call_text(c))
            calls.append(parts[-1])
        chunks.append("<|im_start|>" + m["role"] + "\n" + "\n".join(parts) + "<|im_end|>\n")
    return chunks, calls


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(path):
    r = gguf.GGUFReader(path)
    f = r.fields["tokenizer.ggml.tokens"]
    strings = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    t = r.fields["tokenizer.ggml.token_type"]
    types = [int(t.parts[i][0]) for i in t.data]
    dec = byte_decoder()
    out = []
    for s, ty in zip(strings, types):
        # Control (3) and user-defined (4) tokens are their own text; others are byte-encoded.
        out.append(s.encode("utf-8") if ty in (3, 4) else bytes(dec[c] for c in s))
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("--session", "--gguf", "--text", "--tokens", "--spans"):
        ap.add_argument(a, required=True)
    a = ap.parse_args()
    doc = json.load(open(a.session, encoding="utf-8"))
    text = open(a.text, "rb").read()
    tokens = json.load(open(a.tokens))
    spans = json.load(open(a.spans))
    pieces = token_bytes(a.gguf)
    errors = []

    chunks, calls = render(doc)
    expected = "".join(chunks).encode("utf-8")
    if text != expected:
        at = next((i for i in range(min(len(text), len(expected))) if text[i] != expected[i]), min(len(text), len(expected)))
        errors.append("rendered text differs at byte %d: got %r, expected %r" % (at, text[at:at + 80], expected[at:at + 80]))
    if b"".join(pieces[t] for t in tokens) != text:
        errors.append("the tokens' pieces do not concatenate to the text")

    def decode(s):
        return b"".join(pieces[t] for t in tokens[s["begin"]:s["end"]]).decode("utf-8", "replace")

    counts = {}
    for s in spans:
        counts[s["kind"]] = counts.get(s["kind"], 0) + 1
        got = decode(s)
        if s["kind"] == "message" and got != chunks[s["index"] - 1]:
            errors.append("message #%d decodes to %r, expected %r" % (s["index"], got[:120], chunks[s["index"] - 1][:120]))
        elif s["kind"] == "tool_call" and calls[s["index"] - 1] not in got:
            errors.append("tool call #%d decodes to %r" % (s["index"], got[:120]))
        elif s["kind"] == "literal" and s["label"] not in got:
            errors.append("literal %r decodes to %r" % (s["label"], got))
    if counts.get("message") != len(chunks) or counts.get("tool_call") != len(calls):
        errors.append("span counts %s for %d messages and %d tool calls" % (counts, len(chunks), len(calls)))
    for e in errors[:10]:
        print("workload_ref: " + e)
    if errors:
        return 1
    print("workload_ref: ok: %d tokens, spans %s" % (len(tokens), counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
