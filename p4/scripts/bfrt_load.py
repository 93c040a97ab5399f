# Load a peregrine-p4 *.bfrt.json into a running program from bfrt_python:
#   PG_BFRT_JSON=target/p4/upf.bfrt.json PG_PROGRAM=upf bfshell -b p4/scripts/bfrt_load.py
# Entries: bfrt.<program>.<table>.add_with_<action>(**key, **data); keyless tables:
# set_default_with_<action>(**data); meters: <meter>.mod(**key, **data); the mirror session
# ("$mirror.cfg", action "$normal"): bfrt.mirror.cfg.add_with_normal(sid=..., ...).
import json
import os

prog = getattr(bfrt, os.environ.get("PG_PROGRAM", "upf"))  # noqa: F821 (bfrt_python global)
with open(os.environ["PG_BFRT_JSON"]) as f:
    entries = json.load(f)

def node(path):
    n = prog
    for part in path.split("."):
        n = getattr(n, part)
    return n

for e in entries:
    fixed = e["table_name"] == "$mirror.cfg"
    t = bfrt.mirror.cfg if fixed else node(e["table_name"])  # noqa: F821
    args = {}
    for k, v in e["key"].items():
        if fixed:
            name = k.lstrip("$")
        else:
            name = k.split(".")[-1] if not k.startswith("$") else k
        args[name] = v["value"]
        if "mask" in v:
            args[name + "_mask"] = v["mask"]
        if "prefix_len" in v:
            args[name + "_p_length"] = v["prefix_len"]
    if fixed:
        args.update({k.lstrip("$"): v for k, v in e.get("data", {}).items()})
    else:
        args.update(e.get("data", {}))
    if "action" not in e:
        t.mod(**args)
    elif e.get("default_action"):
        getattr(t, "set_default_with_" + e["action"].split(".")[-1])(**args)
    else:
        getattr(t, "add_with_" + e["action"].split(".")[-1].lstrip("$"))(**args)
