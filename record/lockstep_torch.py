# lockstep's recorder of torch.distributed calls (`lockstep record --torch`, docs/record.md).
#
# `lockstep record --torch` starts every rank of a PyTorch script with this module armed (through
# torch_sitecustomize.py). When torch.distributed is imported, the public functions of
# torch.distributed are replaced by wrappers that append one JSON line per call to
# $LOCKSTEP_TORCH_DIR/torch.PID.jsonl (one os.write per record: what a rank did is on disk as it
# goes, whatever ends the process), then run the call:
#
# - gloo mode (default): for real, with a backend of nccl (or any other) run as gloo on CPU;
# - fake mode (LOCKSTEP_TORCH_MODE=fake): not at all. Collectives return at once with their
#   tensors unchanged, process groups come from a backend without communication, so every rank
#   runs its whole program.
#
# The recorder is armed through the public torch.distributed API (the functions it wraps,
# Backend.register_backend, Store and ProcessGroup subclasses) and one private function both torch
# 1.13 and 2.x have (_create_work_from_future), so it works with either. Nothing here raises into the user's program: a call the recorder cannot describe is
# recorded as "unrecorded" and run as it is.
import atexit
import functools
import inspect
import itertools
import json
import os
import re
import sys
import threading

FORMAT_VERSION = 1
_DIR = os.environ.get("LOCKSTEP_TORCH_DIR", "")
_MODE = "fake" if os.environ.get("LOCKSTEP_TORCH_MODE") == "fake" else "gloo"
_FAKE_BACKEND = "lockstep_fake"
_SELF = os.path.abspath(__file__)
# Errors of a collective that mean a peer went away (gloo's words): the op itself was issued and
# would wait forever under NCCL; the rank did not fail by itself.
_PEER_FAILURE = re.compile(r"closed by peer|reset by peer|Broken pipe|[Tt]imed out|Connection refused|Socket Timeout")
_DTYPES = {
    "torch.float32": "fp32", "torch.float": "fp32", "torch.float64": "fp64", "torch.double": "fp64",
    "torch.float16": "fp16", "torch.half": "fp16", "torch.bfloat16": "bf16", "torch.int8": "int8",
    "torch.uint8": "uint8", "torch.bool": "uint8", "torch.int32": "int32", "torch.int": "int32",
    "torch.int64": "int64", "torch.long": "int64", "torch.uint32": "uint32", "torch.uint64": "uint64",
    "torch.float8_e4m3fn": "fp8_e4m3", "torch.float8_e4m3fnuz": "fp8_e4m3", "torch.float8_e5m2": "fp8_e5m2",
    "torch.float8_e5m2fnuz": "fp8_e5m2",
    # No NCCL type of their own: the trace type of their element size.
    "torch.int16": "fp16", "torch.uint16": "fp16", "torch.complex32": "fp32", "torch.complex64": "fp32",
    "torch.complex128": "fp64",
}


class _Recorder:
    """The per-process file and the state every wrapper shares."""

    def __init__(self):
        self.pid = os.getpid()
        self.fd = -1
        self.lock = threading.Lock()
        self.seq = 0
        self.local = threading.local()
        self.groups = {}        # id(process group) -> (index, the object)
        self.new_groups = 0     # new_group calls so far (members or not)
        self.handles = itertools.count(1)
        self.thread_names = {}  # thread ident -> name in the records
        self.sources = {}       # code filename -> as written in the records
        self.asked_backend = None
        self.torch_dir = ""
        self.cwd = os.getcwd()

    def active(self):
        return self.fd >= 0 and os.getpid() == self.pid

    def open(self, torch_version):
        if not _DIR or self.fd >= 0:
            return
        path = os.path.join(_DIR, "torch.%d.jsonl" % self.pid)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)

        def env_int(name):
            try:
                return int(os.environ.get(name, "-1"))
            except ValueError:
                return -1

        header = {
            "lockstep_torch": FORMAT_VERSION, "pid": self.pid, "env_rank": env_int("RANK"),
            "env_world_size": env_int("WORLD_SIZE"), "mode": _MODE, "torch": torch_version,
            "python": "%d.%d.%d" % sys.version_info[:3],
        }
        os.write(self.fd, (json.dumps(header, separators=(",", ":")) + "\n").encode())

    def write(self, record):
        """Appends one record; returns its sequence number (0 when not recording)."""
        if not self.active():
            return 0
        thread = threading.current_thread()
        name = self.thread_names.get(thread.ident)
        if name is None:
            name = thread.name or "thread"
            taken = set(self.thread_names.values())
            base, n = name, 2
            while name in taken:
                name = "%s#%d" % (base, n)
                n += 1
            self.thread_names[thread.ident] = name
        with self.lock:
            self.seq += 1
            line = {"seq": self.seq, "thread": name}
            line.update(record)
            os.write(self.fd, (_ENCODE(line) + "\n").encode())
            return self.seq

    def depth(self):
        return getattr(self.local, "depth", 0)

    def source(self):
        """file:line and function of the innermost caller outside torch and this module."""
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if (not filename.startswith(self.torch_dir) and filename != _SELF and not filename.startswith("<frozen")
                    and not filename.startswith("<string>")):
                shown = self.sources.get(filename)
                if shown is None:
                    shown = filename
                    full = os.path.abspath(filename)
                    if full.startswith(self.cwd + os.sep):
                        shown = os.path.relpath(full, self.cwd)
                    self.sources[filename] = shown
                return "%s:%d" % (shown, frame.f_lineno), frame.f_code.co_name
            frame = frame.f_back
        return "?", "?"


_REC = _Recorder()
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _binder(original):
    """The arguments of a call by name, defaults filled in: inspect's bind is a third of a
    recorded call's cost, so the common case (positional-or-keyword parameters) is done here and
    anything else falls back to it. Returns None when the call does not fit the signature."""
    signature = inspect.signature(original)
    params = signature.parameters
    positional = [p.name for p in params.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    defaults = {p.name: p.default for p in params.values() if p.default is not p.empty}
    required = [p.name for p in params.values() if p.default is p.empty]
    simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params.values())

    def bind(args, kwargs):
        if simple and len(args) <= len(positional):
            a = dict(defaults)
            a.update(zip(positional, args))
            for key, value in kwargs.items():
                if key not in params or key in positional[:len(args)]:
                    return None
                a[key] = value
            if all(name in a for name in required):
                return a
            return None
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        return dict(bound.arguments)

    return bind


def _dtype(tensor):
    return _DTYPES.get(str(tensor.dtype), "uint8")


def _bytes(tensor):
    return int(tensor.numel()) * int(tensor.element_size())


class _Described:
    """What one call issues, as the trace will hold it."""

    def __init__(self, op, group, size=0, dtype=None, root=None, peer=None, async_op=False, ops=None, splits=None):
        self.op, self.group, self.size, self.dtype = op, group, size, dtype
        self.root, self.peer, self.async_op, self.ops = root, peer, async_op, ops
        self.splits = splits  # all_to_all_single, allgather_v: (bytes to each member or None, bytes from each)

    def fields(self, c10d):
        out = {"op": self.op}
        out.update(_group_fields(c10d, self.group))
        if self.ops is not None:
            out["ops"] = [dict(sub.fields(c10d)) for sub in self.ops]
            return out
        out["size"] = int(self.size)
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.root is not None:
            out["root"] = int(self.root)
        if self.peer is not None:
            out["peer"] = self.peer if self.peer == "any" else int(self.peer)
        if self.splits is not None:
            if self.splits[0] is not None:
                out["send_splits"] = [int(s) for s in self.splits[0]]
            out["recv_splits"] = [int(s) for s in self.splits[1]]
        return out


def _group_fields(c10d, group):
    if group is None or group is c10d.GroupMember.WORLD:
        return {"group": 0}
    group = getattr(group, "_lockstep_inner", group)
    known = _REC.groups.get(id(group))
    if known is not None and known[1] is group:
        return {"group": known[0]}
    try:
        ranks = sorted(int(r) for r in c10d.get_process_group_ranks(group))
    except Exception:
        ranks = []
    return {"group": -1, "group_ranks": ranks}


def _group_size(c10d, group):
    try:
        return int(c10d.get_world_size(group))
    except Exception:
        return 1


def _global(c10d, group, rank):
    """A rank of `group` as a global rank (the group ranks of torch 2.x's group_src/group_dst)."""
    if group is None or group is c10d.GroupMember.WORLD:
        return rank
    return c10d.get_global_rank(getattr(group, "_lockstep_inner", group), rank)


def _root(c10d, a, name, group_name):
    if a.get(name) is not None:
        return a[name]
    if a.get(group_name) is not None:
        return _global(c10d, a.get("group"), a[group_name])
    return 0


def _one(op, key, per_rank=False):
    def describe(c10d, a):
        tensor = a[key]
        size = _bytes(tensor) * (_group_size(c10d, a.get("group")) if per_rank else 1)
        return _Described(op, a.get("group"), size, _dtype(tensor), async_op=bool(a.get("async_op")))
    return describe


def _rooted(op, key, root, group_root, per_rank=False):
    def describe(c10d, a):
        tensor = a[key]
        size = _bytes(tensor) * (_group_size(c10d, a.get("group")) if per_rank else 1)
        return _Described(op, a.get("group"), size, _dtype(tensor), root=_root(c10d, a, root, group_root),
                          async_op=bool(a.get("async_op")))
    return describe


def _p2p(op, peer, group_peer, async_op):
    def describe(c10d, a):
        tensor = a["tensor"]
        target = a.get(peer)
        if target is None and a.get(group_peer) is not None:
            target = _global(c10d, a.get("group"), a[group_peer])
        if target is None:
            target = "any"
        return _Described(op, a.get("group"), _bytes(tensor), _dtype(tensor), peer=target, async_op=async_op)
    return describe


def _sum_bytes(tensors):
    return sum(_bytes(t) for t in tensors)


def _all_gather(c10d, a):
    tensor, outputs = a["tensor"], a.get("tensor_list") or []
    parts = [_bytes(t) for t in outputs]
    if len(set(parts)) > 1:
        # Parts of different sizes: PyTorch gathers them with a broadcast from each member
        # (NCCL), which lockstep models as allgather_v with what comes from each.
        return _Described("allgather_v", a.get("group"), sum(parts), _dtype(tensor), async_op=bool(a.get("async_op")),
                          splits=(None, parts))
    return _Described("allgather", a.get("group"), _bytes(tensor) * _group_size(c10d, a.get("group")), _dtype(tensor),
                      async_op=bool(a.get("async_op")))


def _reduce_scatter(c10d, a):
    tensors = a["input_list"]
    return _Described("reduce_scatter", a.get("group"), _sum_bytes(tensors), _dtype(a["output"]),
                      async_op=bool(a.get("async_op")))


def _all_reduce_coalesced(c10d, a):
    tensors = a["tensors"]
    return _Described("allreduce", a.get("group"), _sum_bytes(tensors), _dtype(tensors[0]) if tensors else None,
                      async_op=bool(a.get("async_op")))


def _all_gather_coalesced(c10d, a):
    tensors = a["input_tensor_list"]
    return _Described("allgather", a.get("group"), _sum_bytes(tensors) * _group_size(c10d, a.get("group")),
                      _dtype(tensors[0]) if tensors else None, async_op=bool(a.get("async_op")))


def _exchange(c10d, group, send_bytes, recv_bytes, dtype, async_op):
    """An all-to-all whose parts differ in size: NCCL runs it as a group of sends and receives,
    one pair per peer with bytes to move (PyTorch's all2all of unequal splits)."""
    me = c10d.get_rank()
    members = sorted(int(r) for r in c10d.get_process_group_ranks(getattr(group, "_lockstep_inner", group))) \
        if group is not None and group is not c10d.GroupMember.WORLD else list(range(c10d.get_world_size()))
    ops = []
    for index, peer in enumerate(members):
        if peer == me:
            continue
        if send_bytes[index]:
            ops.append(_Described("send", group, send_bytes[index], dtype, peer=peer))
        if recv_bytes[index]:
            ops.append(_Described("recv", group, recv_bytes[index], dtype, peer=peer))
    return _Described("group", group, ops=ops, async_op=async_op)


def _all_to_all_single(c10d, a):
    output, tensor = a["output"], a["input"]
    group, async_op = a.get("group"), bool(a.get("async_op"))
    n = _group_size(c10d, group)
    ins, outs = a.get("input_split_sizes"), a.get("output_split_sizes")
    if not ins and not outs:
        return _Described("all_to_all", group, _bytes(tensor), _dtype(tensor), async_op=async_op)
    in_row = _bytes(tensor) // max(int(tensor.shape[0]), 1) if tensor.dim() > 0 else 0
    out_row = _bytes(output) // max(int(output.shape[0]), 1) if output.dim() > 0 else 0
    ins = list(ins) if ins else [int(tensor.shape[0]) // n] * n
    outs = list(outs) if outs else [int(output.shape[0]) // n] * n
    sends = [int(s) * in_row for s in ins]
    recvs = [int(s) * out_row for s in outs]
    if len(set(sends)) == 1 and len(set(recvs)) == 1 and sends[0] == recvs[0]:
        return _Described("all_to_all", group, _bytes(tensor), _dtype(tensor), async_op=async_op)
    return _Described("all_to_all_single", group, max(sum(sends), sum(recvs)), _dtype(tensor), async_op=async_op,
                      splits=(sends, recvs))


def _all_to_all(c10d, a):
    outputs, inputs = a["output_tensor_list"], a["input_tensor_list"]
    group, async_op = a.get("group"), bool(a.get("async_op"))
    sends = [_bytes(t) for t in inputs]
    recvs = [_bytes(t) for t in outputs]
    dtype = _dtype(inputs[0]) if inputs else None
    if sends and len(set(sends)) == 1 and len(set(recvs)) == 1 and sends[0] == recvs[0]:
        return _Described("all_to_all", group, sum(sends), dtype, async_op=async_op)
    return _exchange(c10d, group, sends, recvs, dtype, async_op)


def _barrier(c10d, a):
    return _Described("barrier", a.get("group"), 0, None, async_op=bool(a.get("async_op")))


def _batch(c10d, a):
    ops = []
    for p2p in a["p2p_op_list"]:
        name = getattr(p2p.op, "__name__", "")
        kind = "send" if name == "isend" or "send" in name else "recv"
        peer = getattr(p2p, "peer", None)
        if peer is None and getattr(p2p, "group_peer", None) is not None:
            peer = _global(c10d, p2p.group, p2p.group_peer)
        ops.append(_Described(kind, p2p.group, _bytes(p2p.tensor), _dtype(p2p.tensor), peer=peer))
    return _Described("group", None, ops=ops)


# name -> how a call is described. Functions a torch version lacks are skipped.
_COLLECTIVES = {
    "all_reduce": _one("allreduce", "tensor"),
    "all_reduce_coalesced": _all_reduce_coalesced,
    "all_gather": _all_gather,
    "all_gather_into_tensor": _one("allgather", "output_tensor"),
    "_all_gather_base": _one("allgather", "output_tensor"),
    "all_gather_coalesced": _all_gather_coalesced,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _one("reduce_scatter", "input"),
    "_reduce_scatter_base": _one("reduce_scatter", "input"),
    "all_to_all": _all_to_all,
    "all_to_all_single": _all_to_all_single,
    "broadcast": _rooted("broadcast", "tensor", "src", "group_src"),
    "reduce": _rooted("reduce", "tensor", "dst", "group_dst"),
    "gather": _rooted("gather", "tensor", "dst", "group_dst", per_rank=True),
    "scatter": _rooted("scatter", "tensor", "src", "group_src", per_rank=True),
    "barrier": _barrier,
    "monitored_barrier": _barrier,
    "send": _p2p("send", "dst", "group_dst", False),
    "recv": _p2p("recv", "src", "group_src", False),
    "isend": _p2p("send", "dst", "group_dst", True),
    "irecv": _p2p("recv", "src", "group_src", True),
    "batch_isend_irecv": _batch,
}


def _emulations(c10d, originals):
    """Collectives gloo (1.13) lacks, run in gloo mode through ones it has: the op recorded is
    the one the script called, which NCCL runs as it is."""
    import torch

    def group_rank(group):
        return c10d.get_rank(group) if group is not None else c10d.get_rank()

    def done(async_op, tensors):
        return _Done.work(tensors) if async_op else None

    def reduce_scatter(a):
        output, inputs, group = a["output"], a["input_list"], a.get("group")
        flat = torch.cat([t.reshape(-1) for t in inputs])
        originals["all_reduce"](flat, op=a["op"], group=group)
        offset = sum(t.numel() for t in inputs[:group_rank(group)])
        output.copy_(flat[offset:offset + output.numel()].view_as(output))
        return done(a.get("async_op"), [output])

    def reduce_scatter_tensor(a):
        output, tensor, group = a["output"], a["input"], a.get("group")
        flat = tensor.reshape(-1).clone()
        originals["all_reduce"](flat, op=a["op"], group=group)
        offset = group_rank(group) * output.numel()
        output.copy_(flat[offset:offset + output.numel()].view_as(output))
        return done(a.get("async_op"), [output])

    def all_gather_into_tensor(a):
        output, tensor, group = a["output_tensor"], a["input_tensor"], a.get("group")
        n = _group_size(c10d, group)
        parts = [torch.empty_like(tensor.reshape(-1)) for _ in range(n)]
        originals["all_gather"](parts, tensor.reshape(-1).contiguous(), group=group)
        output.copy_(torch.cat(parts).view_as(output))
        return done(a.get("async_op"), [output])

    def all_to_all(a):
        outputs, inputs, group = a["output_tensor_list"], a["input_tensor_list"], a.get("group")
        received = torch.empty(sum(t.numel() for t in outputs), dtype=outputs[0].dtype)
        originals["all_to_all_single"](received, torch.cat([t.reshape(-1) for t in inputs]),
                                       output_split_sizes=[t.numel() for t in outputs],
                                       input_split_sizes=[t.numel() for t in inputs], group=group)
        offset = 0
        for t in outputs:
            t.copy_(received[offset:offset + t.numel()].view_as(t))
            offset += t.numel()
        return done(a.get("async_op"), outputs)

    return {"reduce_scatter": reduce_scatter, "reduce_scatter_tensor": reduce_scatter_tensor,
            "_reduce_scatter_base": reduce_scatter_tensor, "all_gather_into_tensor": all_gather_into_tensor,
            "_all_gather_base": all_gather_into_tensor, "all_to_all": all_to_all}


class _Work:
    """The handle of an async call: records `wait`, then waits (or, fake, returns at once)."""

    def __init__(self, work, handle, result):
        self._work, self._handle, self._result = work, handle, result

    def wait(self, *args, **kwargs):
        if self._handle:
            _REC.write({"call": "wait", "handle": self._handle, "source": _REC.source()[0]})
        if self._work is None:
            return True
        return self._work.wait(*args, **kwargs)

    def synchronize(self):
        return self.wait()

    def is_completed(self):
        return True if self._work is None else self._work.is_completed()

    def is_success(self):
        return True if self._work is None else self._work.is_success()

    def exception(self):
        return None if self._work is None else self._work.exception()

    def get_future(self):
        if self._work is not None:
            return self._work.get_future()
        import torch
        future = torch.futures.Future()
        future.set_result(self._result)
        return future

    def __getattr__(self, name):
        if self._work is None:
            raise AttributeError(name)
        return getattr(self._work, name)


def _fake_result(name, a):
    """What a call returns when nothing is communicated."""
    if name == "batch_isend_irecv":
        return [_Work(None, 0, [p.tensor]) for p in a["p2p_op_list"]]
    if name == "recv":
        return a.get("src") if a.get("src") is not None else -1
    if a.get("async_op") or name in ("isend", "irecv"):
        tensor = a.get("tensor")
        return _Work(None, 0, [tensor] if tensor is not None else [])
    return None


def _wrap_collective(c10d, name, original, describe, emulation=None):
    bind = _binder(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if _REC.depth() > 0 or not _REC.active():
            return original(*args, **kwargs)
        a = bind(args, kwargs)
        if a is None:
            return original(*args, **kwargs)  # torch says what is wrong
        group = a.get("group")
        if group is not None and group is c10d.GroupMember.NON_GROUP_MEMBER:
            return original(*args, **kwargs) if _MODE == "gloo" else _fake_result(name, a)
        source, function = _REC.source()
        try:
            described = describe(c10d, a)
            record = {"call": name}
            record.update(described.fields(c10d))
        except Exception as error:  # an argument torch will refuse, or a shape we cannot read
            _REC.write({"call": "unrecorded", "of": name, "message": str(error)[:300], "source": source,
                        "function": function})
            return original(*args, **kwargs)
        handle = 0
        if described.async_op or name in ("isend", "irecv"):
            handle = next(_REC.handles)
            record["handle"] = handle
        record["source"] = source
        record["function"] = function
        seq = _REC.write(record)
        if _MODE == "fake":
            result = _fake_result(name, a)
            if handle and isinstance(result, _Work):
                result._handle = handle
            return result
        if emulation is not None:
            result = _call(emulation, (a,), {}, seq)
        else:
            result = _call(original, args, kwargs, seq)
        if handle and result is not None:
            return _Work(result, handle, None)
        return result

    return wrapper


def _call(original, args, kwargs, seq):
    """Runs the real call one level deeper (calls it makes are not recorded); an exception is
    recorded, marked with the record it ended, and raised on."""
    _REC.local.depth = _REC.depth() + 1
    try:
        return original(*args, **kwargs)
    except BaseException as error:
        message = str(error)
        _REC.write({"call": "raised", "of": seq, "type": type(error).__name__, "message": message[:300],
                    "peer_failure": bool(_PEER_FAILURE.search(message))})
        try:
            error._lockstep_record = seq
        except Exception:
            pass
        raise
    finally:
        _REC.local.depth -= 1


class _Done:
    """Makes finished `Work` objects for the fake backend (what C++ callers such as DDP wait on)."""

    @staticmethod
    def work(result):
        import torch
        from torch._C._distributed_c10d import _create_work_from_future
        future = torch.futures.Future()
        future.set_result(result)
        return _create_work_from_future(future)


def _fake_backend_classes(c10d):
    import torch

    class FakeStore(c10d.Store):
        """A store of this process alone. Its store-based barriers see every rank at once."""

        def __init__(self, world_size):
            super().__init__()
            self.world_size = world_size
            self.values = {}

        def set(self, key, value):
            self.values[key] = value

        def get(self, key):
            return self.values.get(key, b"")

        def add(self, key, value):
            if "store_based_barrier" in key:
                return self.world_size
            total = int(self.values.get(key, 0)) + int(value)
            self.values[key] = total
            return total

        def compare_set(self, key, expected, desired):
            self.values[key] = desired
            return desired

        def delete_key(self, key):
            return self.values.pop(key, None) is not None

        def num_keys(self):
            return len(self.values)

        def check(self, keys):
            return True

        def wait(self, *args):
            return None

        def set_timeout(self, timeout):
            return None

    class FakeProcessGroup(c10d.ProcessGroup):
        """A process group that communicates nothing: every call is finished at once. The calls
        that reach it come from C++ (DistributedDataParallel's Reducer and its start-up
        broadcasts): the collectives among them are recorded here, as `ProcessGroup.NAME`."""

        def getBackendName(self):
            return _FAKE_BACKEND

        def _record(self, name, op, tensors, per_rank=False, root=None):
            if _REC.depth() > 0 or not _REC.active():
                return
            size = sum(_bytes(t) for t in tensors) * (self.size() if per_rank else 1)
            described = _Described(op, self, size, _dtype(tensors[0]) if tensors else None,
                                   root=None if root is None else _global(c10d, self, root))
            fields = {"call": "ProcessGroup." + name}
            fields.update(described.fields(c10d))
            fields["source"], fields["function"] = _REC.source()
            _REC.write(fields)

        def allreduce(self, tensors, *rest):
            self._record("allreduce", "allreduce", tensors)
            return _Done.work(tensors)

        def allreduce_coalesced(self, tensors, *rest):
            self._record("allreduce_coalesced", "allreduce", tensors)
            return _Done.work(tensors)

        def broadcast(self, tensors, opts=None, *rest):
            self._record("broadcast", "broadcast", tensors, root=getattr(opts, "rootRank", 0))
            return _Done.work(tensors)

        def allgather(self, outputs, inputs, *rest):
            self._record("allgather", "allgather", inputs[:1], per_rank=True)
            for out_list, tensor in zip(outputs, inputs):
                for out in out_list:
                    out.copy_(tensor)
            return _Done.work(outputs)

        def _allgather_base(self, output, tensor, *rest):
            self._record("_allgather_base", "allgather", [output])
            return _Done.work([output])

        def reduce_scatter(self, outputs, inputs, *rest):
            self._record("reduce_scatter", "reduce_scatter", inputs[0] if inputs else [])
            return _Done.work(outputs)

        def _reduce_scatter_base(self, output, tensor, *rest):
            self._record("_reduce_scatter_base", "reduce_scatter", [tensor])
            return _Done.work([output])

        def barrier(self, *rest):
            self._record("barrier", "barrier", [])
            return _Done.work([torch.zeros(1)])

    def finished_with_first(self, first, *rest):
        return _Done.work(first)

    def finished_with_tensor(self, tensor, *rest):
        return _Done.work([tensor])

    for name in ("reduce", "allgather_coalesced", "alltoall", "gather", "scatter", "send", "recv", "recv_anysource"):
        setattr(FakeProcessGroup, name, finished_with_first)
    setattr(FakeProcessGroup, "alltoall_base", finished_with_tensor)

    def create(store, rank, size, timeout):
        return FakeProcessGroup(rank, size)

    return FakeStore, create


def _wrap_init(c10d, original):
    bind = _binder(original)
    fake_store = []

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        a = bind(args, kwargs) if _REC.active() else None
        if a is None:
            return original(*args, **kwargs)
        asked = str(a.get("backend") or "")
        _REC.asked_backend = asked or None
        world_size = a.get("world_size", -1)
        rank = a.get("rank", -1)
        if world_size is None or world_size < 0:
            world_size = int(os.environ.get("WORLD_SIZE", "-1"))
        if rank is None or rank < 0:
            rank = int(os.environ.get("RANK", "-1"))
        source, function = _REC.source()
        seq = _REC.write({"call": "init_process_group", "backend": asked, "world_size": world_size, "rank": rank,
                          "source": source, "function": function})
        for key in ("device_id", "pg_options"):
            if key in a:
                a[key] = None
        if _MODE == "fake":
            if not fake_store:
                store_class, create = _fake_backend_classes(c10d)
                fake_store.append(store_class)
                try:
                    c10d.Backend.register_backend(_FAKE_BACKEND, create, devices=["cpu", "cuda"])
                except TypeError:
                    c10d.Backend.register_backend(_FAKE_BACKEND, create)
            a["backend"] = _FAKE_BACKEND
            a["init_method"] = None
            a["store"] = fake_store[0](world_size)
            a["world_size"], a["rank"] = world_size, rank
        else:
            a["backend"] = "gloo"
        result = _call(original, (), a, seq)
        _REC.write({"call": "initialized", "rank": int(c10d.get_rank()), "world_size": int(c10d.get_world_size())})
        return result

    return wrapper


def _wrap_new_group(c10d, original):
    bind = _binder(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        a = bind(args, kwargs) if _REC.depth() == 0 and _REC.active() else None
        if a is None:
            return original(*args, **kwargs)
        _REC.new_groups += 1
        index = _REC.new_groups
        ranks = a.get("ranks")
        record = {"call": "new_group", "group": index,
                  "ranks": sorted(int(r) for r in ranks) if ranks else None}
        if a.get("use_local_synchronization"):
            record["local"] = True
        if a.get("group_desc"):
            record["desc"] = str(a["group_desc"])
        source, function = _REC.source()
        record["source"] = source
        record["function"] = function
        seq = _REC.write(record)
        if "backend" in a and a["backend"] is not None:
            a["backend"] = _FAKE_BACKEND if _MODE == "fake" else "gloo"
        if "pg_options" in a:
            a["pg_options"] = None
        group = _call(original, (), a, seq)
        if group is not None and group is not c10d.GroupMember.NON_GROUP_MEMBER:
            _REC.groups[id(group)] = (index, group)
        return group

    return wrapper


def _wrap_destroy(c10d, original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if _REC.active() and _REC.depth() == 0:
            group = args[0] if args else kwargs.get("group")
            record = {"call": "destroy_process_group"}
            record.update(_group_fields(c10d, group))
            record["source"] = _REC.source()[0]
            _REC.write(record)
        return original(*args, **kwargs)

    return wrapper


def _wrap_get_backend(c10d, original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        backend = original(*args, **kwargs)
        if _REC.asked_backend and str(backend).lower() in ("gloo", _FAKE_BACKEND):
            return _REC.asked_backend
        return backend

    return wrapper


def _object_collectives(c10d):
    """Under --fake the *_object collectives cannot run (they size their second collective from
    what the first received). They are recorded as the two or three collectives PyTorch issues
    for them, the payload's size unknown (0), and their objects left as they are (all_gather_object:
    every slot holds this rank's object)."""
    import torch

    def record(name, op, group, size, dtype, root=None):
        described = _Described(op, group, size, dtype, root=root)
        fields = {"call": name}
        fields.update(described.fields(c10d))
        fields["payload"] = dtype == "uint8"
        fields["source"], fields["function"] = _REC.source()
        _REC.write(fields)

    def all_gather_object(object_list, obj, group=None):
        n = _group_size(c10d, group)
        record("all_gather_object", "allgather", group, 8 * n, "int64")
        record("all_gather_object", "allgather", group, 0, "uint8")
        for i in range(len(object_list)):
            object_list[i] = obj

    def gather_object(obj, object_gather_list=None, dst=0, group=None):
        n = _group_size(c10d, group)
        record("gather_object", "allgather", group, 8 * n, "int64")
        record("gather_object", "gather", group, 0, "uint8", root=dst)
        if object_gather_list is not None:
            for i in range(len(object_gather_list)):
                object_gather_list[i] = obj

    def broadcast_object_list(object_list, src=0, group=None, device=None):
        record("broadcast_object_list", "broadcast", group, 8 * len(object_list), "int64", root=src)
        record("broadcast_object_list", "broadcast", group, 0, "uint8", root=src)

    def scatter_object_list(scatter_object_output_list, scatter_object_input_list, src=0, group=None):
        n = _group_size(c10d, group)
        record("scatter_object_list", "broadcast", group, 8, "int64", root=src)
        record("scatter_object_list", "scatter", group, 0, "uint8", root=src)
        record("scatter_object_list", "scatter", group, 8 * n, "int64", root=src)
        if scatter_object_input_list:
            scatter_object_output_list[0] = scatter_object_input_list[0]

    del torch
    return {"all_gather_object": all_gather_object, "gather_object": gather_object,
            "broadcast_object_list": broadcast_object_list, "scatter_object_list": scatter_object_list}


def _wrap_fake_object(original, fake):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if _REC.depth() > 0 or not _REC.active():
            return original(*args, **kwargs)
        return fake(*args, **kwargs)

    return wrapper


def _install(dist):
    """Replaces the public functions of torch.distributed (and of distributed_c10d, where torch
    itself looks them up) by recording wrappers."""
    import torch
    c10d = dist.distributed_c10d
    _REC.torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    _REC.open(str(getattr(torch, "__version__", "?")))
    if not _REC.active():
        return
    wrappers = {}
    originals = {name: getattr(c10d, name, None) for name in _COLLECTIVES}
    emulations = _emulations(c10d, originals) if _MODE == "gloo" else {}
    for name, describe in _COLLECTIVES.items():
        original = originals[name]
        if original is not None:
            wrappers[name] = _wrap_collective(c10d, name, original, describe, emulations.get(name))
    wrappers["init_process_group"] = _wrap_init(c10d, c10d.init_process_group)
    wrappers["new_group"] = _wrap_new_group(c10d, c10d.new_group)
    wrappers["destroy_process_group"] = _wrap_destroy(c10d, c10d.destroy_process_group)
    if _MODE == "fake":
        for name, fake in _object_collectives(c10d).items():
            original = getattr(c10d, name, None)
            if original is not None:
                wrappers[name] = _wrap_fake_object(original, fake)
    for name, wrapper in wrappers.items():
        original = getattr(c10d, name)
        setattr(c10d, name, wrapper)
        if getattr(dist, name, None) is original:
            setattr(dist, name, wrapper)
    get_backend = getattr(dist, "get_backend", None)
    if get_backend is not None:
        dist.get_backend = _wrap_get_backend(c10d, get_backend)
    _arm_endings()


def _arm_endings():
    previous = sys.excepthook

    def excepthook(kind, error, traceback):
        where = "?"
        frame_tb = traceback
        while frame_tb is not None:
            filename = frame_tb.tb_frame.f_code.co_filename
            if not filename.startswith(_REC.torch_dir) and filename != _SELF:
                where = "%s:%d" % (_REC.sources.get(filename, filename), frame_tb.tb_lineno)
            frame_tb = frame_tb.tb_next
        in_call = getattr(error, "_lockstep_record", 0)
        message = str(error)
        _REC.write({"call": "uncaught", "type": kind.__name__, "message": message[:300], "in_call": in_call,
                    "peer_failure": bool(in_call) and bool(_PEER_FAILURE.search(message)), "source": where})
        previous(kind, error, traceback)

    sys.excepthook = excepthook

    previous_thread_hook = getattr(threading, "excepthook", None)
    if previous_thread_hook is not None:
        def thread_hook(args):
            _REC.write({"call": "thread_error", "type": args.exc_type.__name__,
                        "message": str(args.exc_value)[:300]})
            previous_thread_hook(args)
        threading.excepthook = thread_hook

    def at_exit():
        _REC.write({"call": "exit"})

    atexit.register(at_exit)


class _Finder:
    """Arms the recorder as soon as torch.distributed has been imported."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch.distributed":
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_install(module):
            exec_module(module)
            try:
                if module.is_available():
                    _install(module)
            except Exception as error:
                sys.stderr.write("lockstep record: cannot record torch.distributed: %r\n" % (error,))

        loader.exec_module = exec_and_install
        return spec


def arm():
    if not _DIR:
        return
    if "torch.distributed" in sys.modules:
        _install(sys.modules["torch.distributed"])
    else:
        sys.meta_path.insert(0, _Finder())
