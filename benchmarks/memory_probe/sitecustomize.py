"""A memory probe for `streamcal run` (issue 37; a tool, not part of the package).

Put this directory on ``PYTHONPATH`` and set ``MEMPROBE_DIR``: every ``streamcal run``
process started then (e.g. by ``benchmarks/pending_memory.py``) appends, every
``MEMPROBE_EVERY`` seconds (20), one JSON line to ``MEMPROBE_DIR/<pid>.jsonl``: RSS,
glibc's ``mallinfo2`` (MiB), tracemalloc's total (``MEMPROBE_TRACE=0`` to leave it off;
``MEMPROBE_FRAMES``, 1) and its top sites every ``MEMPROBE_SNAP``-th sample (a snapshot
holds the GIL 15-25 s and ~100 MiB at 10^6 waiting), gc counts, RocksDB's memory
properties, kafka-python's queued fetch answers and the heap's trims; every gen-2
collection goes to ``<pid>.gc``. docs/processor.md ("Sampled from inside") has a run.
"""

import os

_cmd = open("/proc/self/cmdline", "rb").read().split(b"\0")
if os.environ.get("MEMPROBE_DIR") and b"run" in _cmd and any(b"streamcal" in c for c in _cmd[:3]):
    import ctypes
    import gc
    import json
    import sys
    import threading
    import time
    import tracemalloc

    _reg = {"KVStore": [], "NativeHeap": [], "KafkaConsumer": []}

    def _wrap(cls, name):
        init = cls.__init__

        def __init__(self, *a, **k):
            _reg[name].append(self)
            init(self, *a, **k)

        cls.__init__ = __init__

    try:
        import kafka

        from streamcal.stream import native_heap as _nh
        from streamcal.stream.state import kv as _kv

        _wrap(_kv.KVStore, "KVStore")
        _wrap(_nh.NativeHeap, "NativeHeap")
        _wrap(kafka.KafkaConsumer, "KafkaConsumer")
    except Exception as e:
        sys.stderr.write(f"memprobe: no registry: {e!r}\n")
    _gcpath = os.path.join(os.environ["MEMPROBE_DIR"], f"{os.getpid()}.gc")
    _gcout = open(_gcpath, "a")
    _gct = [0.0]

    def _gccb(phase, info):
        if info.get("generation", 0) < 2:
            return
        if phase == "start":
            _gct[0] = time.perf_counter()
        else:
            st = _status()
            _gcout.write(
                json.dumps(
                    {
                        "t": time.time(),
                        "gen": info["generation"],
                        "collected": info["collected"],
                        "uncollectable": info["uncollectable"],
                        "s": round(time.perf_counter() - _gct[0], 3),
                        "rss_after": st.get("VmRSS"),
                        "anon_after": st.get("RssAnon"),
                    }
                )
                + "\n"
            )
            _gcout.flush()

    gc.callbacks.append(_gccb)
    _every = float(os.environ.get("MEMPROBE_EVERY", "20"))
    _snap_every = int(os.environ.get("MEMPROBE_SNAP", "3"))  # snapshot every Nth sample
    if os.environ.get("MEMPROBE_TRACE", "1") == "1":
        tracemalloc.start(int(os.environ.get("MEMPROBE_FRAMES", "1")))

    class _MI2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    _libc = ctypes.CDLL("libc.so.6")
    _libc.mallinfo2.restype = _MI2

    def _status():
        d = {}
        for l in open("/proc/self/status"):
            if l.startswith(("VmRSS", "RssAnon", "RssFile", "VmHWM")):
                d[l.split(":")[0]] = int(l.split()[1]) // 1024
        return d

    def _sample(n, out):
        t0 = time.time()
        rec = {"t": t0, "n": n, **_status()}
        m = _libc.mallinfo2()
        rec["malloc"] = {
            f: getattr(m, f) >> 20
            for f, _ in _MI2._fields_
            if f not in ("ordblks", "smblks", "hblks", "usmblks")
        }
        rec["malloc"]["hblks"] = m.hblks
        rec["pyblocks"] = sys.getallocatedblocks()
        if tracemalloc.is_tracing():
            cur, peak = tracemalloc.get_traced_memory()
            rec["traced_mib"] = cur >> 20
            rec["traced_peak_mib"] = peak >> 20
            rec["tracemalloc_own_mib"] = tracemalloc.get_tracemalloc_memory() >> 20
        objs = gc.get_objects()
        counts = {}
        for o in objs:
            tn = type(o).__name__
            counts[tn] = counts.get(tn, 0) + 1
        stores, consumers, heaps = _reg["KVStore"], _reg["KafkaConsumer"], _reg["NativeHeap"]
        del objs
        rec["gc_objects"] = sum(counts.values())
        rec["gc_count"] = gc.get_count()
        rec["gc_stats"] = [(x["collections"], x["collected"]) for x in gc.get_stats()]
        rec["gc_frozen"] = gc.get_freeze_count()
        rec["types"] = dict(sorted(counts.items(), key=lambda kv: -kv[1])[:12])
        rs = []
        for s in stores:
            db = getattr(s, "_db", None)
            if db is None:
                continue
            p = {}
            for k in (
                "cur-size-all-mem-tables",
                "size-all-mem-tables",
                "estimate-table-readers-mem",
                "block-cache-usage",
                "block-cache-pinned-usage",
                "num-immutable-mem-table",
                "estimate-num-keys",
            ):
                try:
                    v = db.property_int_value("rocksdb." + k)
                    p[k] = v >> 20 if "num" not in k else v
                except Exception as e:
                    p[k] = repr(e)[:60]
            rs.append(p)
        rec["rocksdb"] = rs
        ks = []
        for c in consumers:
            try:
                f = c._fetcher
                cf = getattr(f, "_completed_fetches", None)
                npr = getattr(f, "_next_partition_records", None)
                ks.append(
                    {
                        "completed": len(cf) if cf is not None else None,
                        "next": npr is not None,
                        "paused": len(c.paused()),
                    }
                )
            except Exception as e:
                ks.append(repr(e)[:80])
        rec["kafka"] = ks
        rec["heap"] = [
            {
                "trims": h.trims,
                "trim_s": round(h.trim_seconds, 2),
                "since_trim": round(time.monotonic() - h.last_trim, 1),
            }
            for h in heaps
        ]
        if tracemalloc.is_tracing() and n % _snap_every == 0:
            snap = tracemalloc.take_snapshot()
            st = snap.statistics("lineno")
            rec["top"] = [
                [
                    str(s.traceback[0].filename).split("site-packages/")[-1].split("streamcal/")[-1]
                    + ":"
                    + str(s.traceback[0].lineno),
                    s.size >> 10,
                    s.count,
                ]
                for s in st[:15]
            ]
            del snap, st
        rec["probe_s"] = round(time.time() - t0, 2)
        out.write(json.dumps(rec) + "\n")
        out.flush()

    def _loop():
        path = os.path.join(os.environ["MEMPROBE_DIR"], f"{os.getpid()}.jsonl")
        with open(path, "a") as out:
            n = 0
            while True:
                time.sleep(_every)
                try:
                    _sample(n, out)
                except Exception as e:
                    out.write(json.dumps({"error": repr(e)}) + "\n")
                    out.flush()
                n += 1

    threading.Thread(target=_loop, daemon=True, name="memprobe").start()
