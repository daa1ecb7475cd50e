#!/usr/bin/env python3
"""Builds tests/data/fork-labels.json: real fork records with the labels a reader gave them.

For each source (a pair of captures and the `flipscope branch` output over them) it keeps what
the judge needs and nothing else: the rendered transcript's text, the workload's literal spans,
tools and tool-call markers, and per record both futures' pieces (with how each stopped), the
transcript's continuation and the byte offset of the branch point. The labels come from
fork-labels.tsv (source, position, outcome, failure kind, reason, base grade, cand grade), written
by hand after reading each record; a record without a label is left out.

Each record's `label` is {"outcome", "kind", "reason", "base_grade", "cand_grade"}: the grades are
each future's own grade on the graded scale (none, equivalent_call, harmless_call, invented_fact,
wrong_command, literal_mutated, invalid_tool_call, runaway), from which the reader derived the
outcome. A row of five columns (no grades) gives null grades. A reason that holds
`held_out: WHY` marks a record the scale does not decide: its label also carries "held_out": WHY.

    make-fork-labels.py [--source NAME CAPTURE BRANCHES.json ...] [--keep OLD.json] -o fork-labels.json

--keep starts from an earlier fork-labels.json (its sources and labelled records, which need their
captures no more), so that a new source can be added without the old captures at hand; a source
named again is rebuilt. A kept record takes its label from its TSV row when it has one, so the
labels of kept sources can be changed in the TSV alone.

The transcript's text is detokenized here from the GGUF vocabulary (byte-level BPE or
SentencePiece) and checked against every record's reference text, which flipscope wrote.
"""
import argparse
import csv
import json
import os


def byte_decoder():
    # The byte-level BPE alphabet: printable bytes map to themselves, the rest above U+0100.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def vocab_bytes(model_path):
    import gguf  # only to read new sources: --keep alone relabels without it

    r = gguf.GGUFReader(model_path)
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    kind = bytes(r.fields["tokenizer.ggml.model"].parts[-1]).decode()
    out = []
    if kind == "gpt2":
        dec = byte_decoder()
        for t in tokens:
            out.append(bytes(dec[c] for c in t) if all(c in dec for c in t) else t.encode())
    else:  # SentencePiece: U+2581 is a space, <0xNN> one byte
        for t in tokens:
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                out.append(bytes([int(t[3:5], 16)]))
            else:
                out.append(t.replace("\u2581", " ").encode())
    return out


def source_entry(capture, branches):
    meta = open_meta(capture)
    from safetensors import safe_open

    with safe_open(capture, "numpy") as f:  # one tensor only: numpy cannot hold BF16 logits
        tokens = f.get_tensor("tokens").tolist()
    pieces = vocab_bytes_cache(None, capture)
    offsets, text = [], b""
    for t in tokens:
        offsets.append(len(text))
        text += pieces[t]
    offsets.append(len(text))
    w = meta["workload"]
    literals = [{"label": s["label"], "end_byte": offsets[s["end"]]} for s in w.get("spans", []) if s["kind"] == "literal"]
    cfg = branches["config"]
    return {
        "capture": os.path.basename(capture),
        "model": os.path.basename(meta["model"]["path"]),
        "knobs": [cfg["base"]["flags"], cfg["cand"]["flags"]],
        "text": text.decode("utf-8", "replace"),
        "literals": literals,
        "tools": w.get("tools"),
        "envelope": cfg["envelope"],
        "reconverge": cfg["reconverge"],
    }, offsets, text


GRADES = ["none", "equivalent_call", "harmless_call", "invented_fact", "wrong_command", "literal_mutated",
          "invalid_tool_call", "runaway"]


def read_labels(path):
    # (source, position) -> label; five columns (no grades) or seven.
    labels = {}
    with open(path) as f:
        for row in csv.reader((l for l in f if l.strip() and not l.startswith("#")), delimiter="\t"):
            if len(row) not in (5, 7):
                raise SystemExit(f"{path}: {row[:2]}: expected 5 or 7 tab-separated columns, got {len(row)}")
            src, pos, outcome, kind, reason = row[:5]
            base_grade, cand_grade = row[5:] if len(row) == 7 else (None, None)
            for g in (base_grade, cand_grade):
                if g is not None and g not in GRADES:
                    raise SystemExit(f"{path}: {src} {pos}: unknown grade {g!r}")
            label = {"outcome": outcome, "kind": kind or None, "reason": reason,
                     "base_grade": base_grade, "cand_grade": cand_grade}
            if "held_out:" in reason:
                label["held_out"] = reason.split("held_out:", 1)[1].strip()
            labels[(src, int(pos))] = label
    return labels


def open_meta(capture):
    with open(capture, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return json.loads(next(iter(header["__metadata__"].values())))


def future(f, side):
    return {"pieces": f["pieces"], "ended": side["ended"], "cap_hit": side["call_cap_hit"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", nargs=3, action="append", metavar=("NAME", "CAPTURE", "BRANCHES"), default=[])
    ap.add_argument("--labels", default=os.path.join(os.path.dirname(__file__), "fork-labels.tsv"))
    ap.add_argument("--keep", help="an earlier fork-labels.json whose sources and records are kept")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    if not a.source and not a.keep:
        ap.error("give --source, or --keep to relabel an earlier file")
    labels = read_labels(a.labels)
    doc = {"sources": {}, "records": []}
    if a.keep:
        with open(a.keep) as f:
            doc = json.load(f)
        rebuilt = {name for name, _, _ in a.source}
        doc["sources"] = {k: v for k, v in doc["sources"].items() if k not in rebuilt}
        doc["records"] = [r for r in doc["records"] if r["source"] not in rebuilt]
        for r in doc["records"]:  # the TSV is the labels' source: a kept record takes its row's label
            r["label"] = labels.get((r["source"], r["position"]), r["label"])
    for name, capture, path in a.source:
        with open(path) as f:
            branches = json.load(f)
        entry, offsets, text = source_entry(capture, branches)
        doc["sources"][name] = entry
        for r in branches["records"]:
            nxt = r["position"] + 1
            ref = b"".join(vocab_bytes_cache(entry, capture)[t] for t in r["reference"]["tokens"])
            assert ref.decode("utf-8", "replace") == r["reference"]["text"], (name, r["position"])
            label = labels.get((name, r["position"]))
            if label is None:
                continue
            doc["records"].append({
                "source": name,
                "position": r["position"],
                "prefix_bytes": offsets[nxt],
                "base": future(r["base_future"], r["base"]),
                "cand": future(r["cand_future"], r["cand"]),
                "reference": {"pieces": [vocab_bytes_cache(entry, capture)[t].decode("utf-8", "replace")
                                         for t in r["reference"]["tokens"]],
                              "ended": nxt + len(r["reference"]["tokens"]) >= len(offsets) - 1},
                "label": label,
            })
    with open(a.output, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(doc['records'])} labelled records from {len(doc['sources'])} sources")


_vocab = {}


def vocab_bytes_cache(entry, capture):
    if capture not in _vocab:
        _vocab[capture] = vocab_bytes(open_meta(capture)["model"]["path"])
    return _vocab[capture]


if __name__ == "__main__":
    main()
