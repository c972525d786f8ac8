#!/usr/bin/env python3
"""cost_model.py — how long a kernel of the chapter takes on a named GPU, by a model whose every
parameter is in the open (benchmarks/README.md, "When does sparse attention pay?"). Every figure it
produces is a model, never a measurement.

    time = launches x t_launch + max(compute, DRAM, L1, span)

    compute = tensor FLOPs / (eta_tensor x tensor peak) + CUDA-core FLOPs / (eta_cuda x FP32 peak)
              + integer ops (the per-element mask of masked tiles, mask builders) / INT32 rate
    DRAM    = DRAM bytes / DRAM bandwidth
    L1      = (shared-memory wavefronts + global sectors / 4) / (SMs x clock): one 128-byte
              wavefront per clock per SM
    span    = the busiest thread block's tiles at one SM's share of the compute rates (a grid
              smaller than the GPU cannot use all of it)

The counts (FLOPs, DRAM bytes, wavefronts and sectors, launches, tiles visited, metadata bytes) are
the simulator's profile's (common/cudasim/README.md, "The profile") where the simulator can run the
problem, and elsewhere come from COUNT MODELS: formulas of the problem and the pattern's tile
geometry whose coefficients are fitted to the profile records (benchmarks/results/profile/
crossover.jsonl; crossover.py reports their error). A pipeline (DSA: indexer, top-k, attention;
block-sparse with its mask built per call) is the sum of its stages.

Standard library only: the tables and their check run without PyTorch.
"""
import functools
import math
import os
from dataclasses import dataclass, replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TILE = 64  # the kernels' tile (Br = Bc = 64; ATTN_SPARSE_TILE)

# ---- the devices: parameters and their sources -------------------------------------------------
# (value, unit, source). "assumed" marks a value with no published source: the fit from gpu.sh's
# measurements (fit_device) replaces it.
H100_PARAMS = {
    "sms": (132, "SMs", "NVIDIA H100 SXM5: 132 SMs (Hopper architecture whitepaper)"),
    "tensor_flops": (989.4e12, "FLOP/s", "dense FP16/BF16 tensor peak, NVIDIA H100 SXM datasheet"),
    "fp32_flops": (66.9e12, "FLOP/s", "FP32 peak, NVIDIA H100 SXM datasheet"),
    "dram_bw": (3.35e12, "B/s", "HBM3 bandwidth, NVIDIA H100 SXM datasheet"),
    "l2_bytes": (50 * 2 ** 20, "B", "L2 capacity (the profile's L2 model), Hopper whitepaper"),
    "clock": (1.98e9, "Hz", "the clock of the FP32 peak: 66.9 TFLOP/s / (132 SMs x 128 FP32 "
              "lanes x 2 FLOP)"),
    "int32_per_clk": (64, "ops/clock/SM", "64 INT32 lanes per SM (Hopper whitepaper, SM "
                      "diagram: 16 per quadrant)"),
    "eta_tensor": (0.35, "", "FlashAttention-2 reaches 35 % of the H100's tensor peak "
                   "(Shah et al., FlashAttention-3, 2024, abstract); our kernels are FA2 kernels "
                   "on mma.sync"),
    "eta_cuda": (0.35, "", "assumed: the same fraction for CUDA-core FLOPs"),
    "t_launch": (1.0e-6, "s", "assumed from the order a kernel launched behind another on a "
                 "stream waits (NVIDIA Technical Blog, A. Gray, 'Getting Started with CUDA "
                 "Graphs', 2019, measured on a V100: about a microsecond per short kernel); not "
                 "measured on an H100 here"),
    "l1_wavefronts_per_clk": (1, "/clock/SM", "shared memory: 32 banks of 4 bytes per clock "
                              "(CUDA C++ Programming Guide, shared memory of compute capability "
                              "5.x and later); global sectors through L1 at 4 per clock: assumed "
                              "the same 128-byte path"),
}
DEVICES = {"H100-SXM": {"name": "NVIDIA H100 SXM (80 GB), model",
                        **{k: v[0] for k, v in H100_PARAMS.items()}}}
DEFAULT_DEVICE = "H100-SXM"


# ---- counts ------------------------------------------------------------------------------------

@dataclass
class Counts:
    """What one kernel (or one stage of a pipeline) does. crit_*: the busiest thread block's
    share (tensor FLOPs and integer ops), for the span bound."""
    flops_tc: float = 0.0
    flops_cc: float = 0.0
    int_ops: float = 0.0
    dram: float = 0.0
    l1: float = 0.0  # shared wavefronts + global sectors / 4
    launches: int = 1
    crit_flops_tc: float = 0.0
    crit_int_ops: float = 0.0
    tiles: float = 0.0  # 64 x 64 tiles visited (all heads)
    meta_bytes: float = 0.0

    def __add__(self, o):
        return Counts(*(getattr(self, f) + getattr(o, f) for f in self.__dataclass_fields__))


def time_parts(c, dev):
    """The model's terms for counts c on device dev (seconds): a dict, with 'total'."""
    sms, clk = dev["sms"], dev["clock"]
    tc_rate = dev["eta_tensor"] * dev["tensor_flops"]
    int_rate = sms * dev["int32_per_clk"] * clk
    compute = (c.flops_tc / tc_rate + c.flops_cc / (dev["eta_cuda"] * dev["fp32_flops"])
               + c.int_ops / int_rate)
    span = c.crit_flops_tc / (tc_rate / sms) + c.crit_int_ops / (int_rate / sms)
    parts = {"launch": c.launches * dev["t_launch"], "compute": compute,
             "dram": c.dram / dev["dram_bw"],
             "l1": c.l1 / (sms * dev["l1_wavefronts_per_clk"] * clk), "span": span}
    parts["body"] = max(parts["compute"], parts["dram"], parts["l1"], parts["span"])
    parts["bound"] = max(("compute", "dram", "l1", "span"), key=lambda k: parts[k])
    parts["total"] = parts["launch"] + parts["body"]
    return parts


def time_s(c, dev):
    return time_parts(c, dev)["total"]


def pipeline_time(stages, dev):
    """Stages run one after another: {name: Counts} -> ({name: seconds}, total)."""
    per = {name: time_s(c, dev) for name, c in stages.items()}
    return per, sum(per.values())


# ---- tile geometry of the patterns -------------------------------------------------------------

@dataclass
class Geometry:
    """Per head: kept entries, 64 x 64 tiles visited and masked (per-element work), their busiest
    query tile, query tiles, the block mask's bytes."""
    L: int
    causal: bool
    entries: float
    tiles: int
    masked: int
    crit_tiles: int
    crit_masked: int
    qtiles: int
    meta_bytes: int = 0

    @property
    def dense_entries(self):
        return self.L * (self.L + 1) / 2 if self.causal else float(self.L) * self.L

    @property
    def density(self):
        """Kept entries / the dense baseline's (causal entries on a causal problem): the ideal
        speed-up is 1 / density."""
        return self.entries / self.dense_entries


def _blocks(L):
    return -(-L // TILE)


def band_geometry(L, lo, hi, causal):
    """Tiles of a band pattern: key j kept for aligned query a when lo <= j - a <= hi (a window
    lo = -w, hi = w; a causal window lo = 1 - w, hi = 0; dense causal lo = -L, hi = 0). Lq = Lk
    = L, a multiple of 64 or not."""
    if causal:
        hi = min(hi, 0)
    nq = nk = _blocks(L)
    tiles = masked = crit = crit_m = 0
    for qt in range(nq):
        a0, a1 = qt * TILE, min(L, (qt + 1) * TILE) - 1
        k_lo = max(0, (a0 + lo) // TILE)
        k_hi = min(nk - 1, (a1 + hi) // TILE)
        n = max(0, k_hi - k_lo + 1)
        # full: every (a, j) of the tile in the band and in range (tail tiles are masked)
        f_lo = max(k_lo, -((-(a1 + lo)) // TILE))  # j0 - a1 >= lo
        f_hi = min(k_hi, (a0 + hi - (TILE - 1)) // TILE)  # j1 - a0 <= hi
        full = 0
        if a1 - a0 == TILE - 1:
            full = max(0, f_hi - f_lo + 1)
            if full and (f_hi + 1) * TILE > L:  # a tail key tile is masked
                full -= 1
        tiles += n
        masked += n - full
        if n > crit:
            crit, crit_m = n, n - full
    meta = 4 * (2 * nq + 2 * nq * nk)
    return Geometry(L, causal, band_entries(L, lo, hi), tiles, masked, crit, crit_m, nq, meta)


def band_entries(L, lo, hi):
    """Pairs (a, j) in [0, L)^2 with lo <= j - a <= hi: the sum over d of L - |d|."""
    def ramp(a, b):  # sum over d in [a, b] (0 <= a) of L - d
        return 0 if b < a else (b - a + 1) * L - (a + b) * (b - a + 1) // 2
    lo, hi = max(lo, 1 - L), min(hi, L - 1)
    if hi < lo:
        return 0
    if lo >= 0:
        return ramp(lo, hi)
    if hi < 0:
        return ramp(-hi, -lo)
    return ramp(0, hi) + ramp(1, -lo)
    return Geometry(L, causal, entries, tiles, masked, crit, crit_m, nq, meta)


def dense_geometry(L, causal):
    return band_geometry(L, -L, L, causal)


def closest_parameter(dens, target, hi):
    """The integer p in [1, hi] whose dens(p) is closest to target, dens growing with p
    (bisection for the smallest p with dens(p) >= target, then the better of it and p - 1)."""
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if dens(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return min((p for p in (lo - 1, lo) if p >= 1), key=lambda p: abs(dens(p) - target))


def window_w_for(L, density, causal=True):
    """The causal window W (keys a - W < j <= a) whose density (of the causal entries) is closest
    to `density`, or the window w (|j - a| <= w) when not causal (of all entries)."""
    if causal:
        return closest_parameter(lambda w: band_entries(L, 1 - w, 0) / (L * (L + 1) / 2),
                                 density, L)
    return closest_parameter(lambda w: band_entries(L, -w, w) / (L * L), density, L)


def dilated_geometry(L, w, d):
    """dilated:w=W,d=D, not causal (keys a + d m, |m| <= w): every visited tile is masked."""
    if d > TILE:
        raise ValueError("dilated_geometry: d <= 64 (every tile of the span then holds a key)")
    nq = nk = _blocks(L)
    tiles = crit = 0
    for qt in range(nq):
        a0, a1 = qt * TILE, min(L, (qt + 1) * TILE) - 1
        n = min(nk - 1, (a1 + w * d) // TILE) - max(0, (a0 - w * d) // TILE) + 1
        tiles += n
        crit = max(crit, n)
    entries = 0
    for a in range(L):  # m with 0 <= a + d m < L, |m| <= w
        entries += min(w, (L - 1 - a) // d) + min(w, a // d) + 1
    masked = tiles if d > 1 else 0
    return Geometry(L, False, entries, tiles, masked, crit, crit if d > 1 else 0, nq,
                    4 * (2 * nq + 2 * nq * nk))


def bigbird_geometry(L, b, r):
    """bigbird:b=B,r=R, not causal, b a multiple of 64 dividing L: query block I keeps I-1, I, I+1,
    the global blocks 0 and NB-1 and min(r, available) random blocks; global rows keep every
    block. Counts only (no causality: the random blocks' positions do not change them)."""
    if b % TILE or L % b:
        raise ValueError("bigbird_geometry: b a multiple of 64 that divides L")
    nb, per = L // b, b // TILE
    blocks = crit = 0
    for I in range(nb):
        if I in (0, nb - 1):
            kept = nb
        else:
            near = len({x for x in (0, I - 1, I, I + 1, nb - 1) if 0 <= x < nb})
            kept = near + min(r, nb - near)
        blocks += kept
        crit = max(crit, kept)
    nq = nk = L // TILE
    return Geometry(L, False, blocks * b * b, blocks * per * per, 0, crit * per, 0, nq,
                    4 * (2 * nq + 2 * nq * nk))


@functools.lru_cache(maxsize=None)  # loaded once per process
def _ladder_module():
    import importlib.util
    path = os.path.join(ROOT, "examples", "06_custom_pattern", "ladder.py")
    spec = importlib.util.spec_from_file_location("ladder", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ladder_geometry(L, w, s=1):
    """ladder:b=64,s=S,w=W, causal (example 06's rule, ladder.py): one block = one tile, the
    diagonal tile masked; K(I) kept blocks per query block from ladder.rungs (its closed form)."""
    lad = _ladder_module()
    nb = _blocks(L)
    kept = _ladder_kept(L, w, s)
    if L % TILE == 0:
        entries = sum((k - 1) * TILE * TILE + TILE * (TILE + 1) // 2 for k in kept)
    else:
        entries = lad.density(L, TILE, s, w) * L * (L + 1) / 2
    return Geometry(L, True, entries, sum(kept), nb, max(kept), 1, nb, 4 * (2 * nb + 2 * nb * nb))


@functools.lru_cache(maxsize=None)
def _ladder_kept(L, w, s):
    """K(I) of ladder_geometry, per process: the lab's solvers and tables ask for the same (L, w)
    hundreds of times, and ladder.rungs is plain Python over every block."""
    lad = _ladder_module()
    return tuple(lad.rungs(I, s, w) for I in range(_blocks(L)))


def ladder_w_for(L, density, s=1):
    """The ladder w (b = 64) whose density is closest to `density`; None when even w = 1 keeps
    more than twice the target (the pattern cannot be that sparse at this L)."""
    def dens(w):
        return ladder_geometry(L, w, s).density
    best = closest_parameter(dens, density, _blocks(L))
    return best if dens(best) <= 2 * density else None


# ---- DSA geometry (example 05) -------------------------------------------------------------------

@dataclass
class DsaSums:
    """Per sequence: visible keys, indexer key tiles (ceil(visible / 64) per query), the keys and
    rows of the queries that must select (visible > k; the others take every key), selected
    keys (min(visible, k)) and attention tiles (ceil(min(visible, k) / 64))."""
    visible: int
    ktiles: int
    select_visible: int
    select_rows: int
    selected: int
    atiles: int
    long_visible: int  # keys of the selecting rows longer than TOPK_CAND


TOPK_CAND = 4096  # example 05's top-k: candidates kept in shared memory after pass 1


def dsa_sums(L, k, causal=True):
    return replace(_dsa_sums(L, k, causal))  # a copy of what this process counted once


@functools.lru_cache(maxsize=None)
def _dsa_sums(L, k, causal):
    """The sums of DsaSums over the L queries, in closed form: causal, query a sees v = a + 1
    keys (v = 1 .. L); otherwise every query sees v = L (tests/benchmarks/test_cost_model.py
    checks both against the sums taken query by query)."""
    def total(a, b):  # sum of v for v = a .. b
        return (a + b) * (b - a + 1) // 2 if b >= a else 0

    def tiles(n):  # sum of ceil(v / TILE) for v = 1 .. n
        q, r = divmod(n, TILE)
        return TILE * q * (q + 1) // 2 + r * (q + 1)

    if not causal:
        sel = L if L > k else 0  # every query selects, or none does
        return DsaSums(L * L, L * -(-L // TILE), sel * L, sel, L * min(L, k),
                       L * -(-min(L, k) // TILE), sel * L if L > TOPK_CAND else 0)
    m = min(L, k)  # the queries v <= k take all their keys, the others k of them
    return DsaSums(total(1, L), tiles(L), total(k + 1, L), L - m, total(1, m) + (L - m) * k,
                   tiles(m) + (L - m) * -(-k // TILE), total(max(k, TOPK_CAND) + 1, L))


def dsa_k_for(L, density):
    """The top-k whose selected keys are closest to `density` of the causal entries."""
    # min(visible, k) summed over causal queries: the keys of a causal window of k
    return closest_parameter(lambda k: band_entries(L, 1 - k, 0) / (L * (L + 1) / 2), density, L)


# ---- count models ------------------------------------------------------------------------------
# Exact where the kernel's structure fixes a count (mma per tile, launches, compulsory bytes);
# fitted where it does not (L1 wavefronts and sectors: COUNT_TERMS, coefficients from the profile
# records by fit_counts). Per sequence and head unless said; B sequences, H heads.

MASK_OPS = 8        # INT32 ops per entry of a masked tile (assumed)
TILE_TEST_OPS = 32  # INT32 ops per tile test of a block-mask builder (assumed)
ELT = {"f16": 2, "bf16": 2, "f32": 4}
MMA_FLOPS = 4096    # mma.m16n8k16: 2 x 16 x 8 x 16


def tile_flops(D):
    """Tensor FLOPs of one 64 x 64 tile of FA2: S = Q K^T and O += P V, 2 D mma each."""
    return 4 * TILE * TILE * D


# The terms each fitted count is a linear combination of, per kernel (per sequence and head):
# fa2-family kernels: tiles visited and query tiles, each with and without the head dimension;
# gather: kept entries and rows; DSA stages: their tiles or keys and rows.
COUNT_TERMS = {
    "fa2": ("tiles*D", "tiles", "qtiles*D", "qtiles"),
    "gather": ("nnz*D", "nnz", "L*D", "L"),
    "indexer": ("ktiles", "L"),
    "topk_radix": ("select_visible", "select_rows", "L"),
    "sparse_mma": ("atiles*D", "atiles", "L*D", "L"),
}
# Which family of COUNT_TERMS a profiled kernel belongs to (example 06's block_sparse is 04's).
FAMILY = {"dense_fa2": "fa2", "block_sparse": "fa2", "window": "fa2", "gather": "gather",
          "indexer": "indexer", "topk_radix": "topk_radix", "sparse_mma": "sparse_mma"}


def term_values(terms, v):
    """The terms' values from a dict v of the problem's quantities (D, L, tiles, ...)."""
    out = []
    for t in terms:
        x = 1.0
        for f in t.split("*"):
            x *= v[f]
        out.append(x)
    return out


def fitted(coef, kernel, v):
    """A fitted count (L1 wavefronts) for kernel on quantities v; 0 when no coefficients."""
    c = coef.get(kernel)
    if c is None:
        return 0.0
    return sum(a * x for a, x in zip(c, term_values(COUNT_TERMS[FAMILY[kernel]], v)))


def fa2_counts(kernel, geo, B, H, D, dtype, coef, metadata=False):
    """dense_fa2, block_sparse or window over geometry geo (per head)."""
    L = geo.L
    v = {"tiles": geo.tiles, "qtiles": geo.qtiles, "D": D, "L": L}
    meta = 4 * (2 * geo.qtiles + geo.tiles) * B if metadata else 0  # the lists it reads
    return Counts(
        flops_tc=B * H * geo.tiles * tile_flops(D),
        int_ops=B * H * geo.masked * TILE * TILE * MASK_OPS,
        dram=B * H * (ELT[dtype] * 4 * L * D + 4 * L) + meta,
        l1=B * H * fitted(coef, kernel, v), launches=1,
        crit_flops_tc=geo.crit_tiles * tile_flops(D),
        crit_int_ops=geo.crit_masked * TILE * TILE * MASK_OPS,
        tiles=B * H * geo.tiles, meta_bytes=meta)


def mask_build_counts(geo, B):
    """The block mask built on the device per call: one launch, a tile test per (query tile, key
    tile), the four arrays written (FlexAttention's create_block_mask runs on the GPU too)."""
    nk = _blocks(geo.L)
    return Counts(int_ops=B * geo.qtiles * nk * TILE_TEST_OPS, dram=B * geo.meta_bytes,
                  launches=1, meta_bytes=B * geo.meta_bytes)


def csr_build_counts(geo, B):
    """The CSR built on the device per call: a counting pass and a filling pass over the entries
    of the visited tiles (a scan between them fused into the second), row pointers and column
    indices written."""
    nnz = geo.entries
    return Counts(int_ops=2 * B * geo.tiles * TILE * TILE * MASK_OPS,
                  dram=B * (4 * nnz + 8 * (geo.L + 1)), launches=2,
                  meta_bytes=B * (4 * nnz + 4 * (geo.L + 1)))


def gather_counts(geo, B, H, D, dtype, coef):
    """Example 04's gather: one warp per query row over its CSR list, CUDA cores."""
    L, nnz = geo.L, geo.entries
    v = {"nnz": nnz, "L": L, "D": D}
    csr = 4 * nnz + 4 * (L + 1)
    return Counts(flops_cc=4.0 * B * H * nnz * D,
                  dram=B * H * (ELT[dtype] * 4 * L * D + 4 * L) + B * csr,
                  l1=B * H * fitted(coef, "gather", v), launches=1, meta_bytes=B * csr)


def dsa_chunk(B, L):
    """Example 05's default chunk: as many query positions as 1 GiB of fp32 logits holds."""
    return max(1, min(L, (1 << 30) // (4 * B * L)))


def dsa_stage_counts(B, H, L, D, k, dtype, coef, HI=16, DI=64, causal=True, l2_bytes=50 * 2 ** 20,
                     sms=132):
    """Example 05's pipeline (indexer, topk_radix, sparse_mma; H query heads share one K/V head
    and one selection): {stage: Counts}. The indexer's fitted L1 counts were profiled at H_I x
    D_I = 16 x 64 and scale with H_I D_I / 1024; sparse_mma's at 16 heads, with ceil(H / 16)."""
    s = dsa_sums(L, k, causal)
    chunks = -(-L // dsa_chunk(B, L))
    e = ELT[dtype]
    vi = {"ktiles": s.ktiles, "L": L}
    indexer = Counts(
        flops_tc=B * MMA_FLOPS * (HI * DI // 32) * s.ktiles,
        dram=B * (e * L * HI * DI + e * L * DI + 4 * L * HI + 4 * s.visible),
        l1=B * fitted(coef, "indexer", vi) * HI * DI / 1024, launches=chunks,
        crit_flops_tc=4 * -(-L // TILE) * (HI * DI // 32) * MMA_FLOPS)
    # top-k: a row that must select is read twice (histogram pass 1 and the output pass); the
    # second read comes from L2 unless the rows the GPU works on at once (8 blocks of 256 threads
    # per SM) exceed it; every row's k slots are written (-1 padded). A row longer than the
    # TOPK_CAND candidates shared memory keeps is assumed to overflow it (the scores of a long
    # row share their top byte by the thousands), so that passes 2-4 read it again from global
    # memory: three more reads, beyond what the profile saw (its rows are at most 1024 long).
    reread = 1 if sms * 8 * 4 * L > l2_bytes else 0
    vt = {"select_visible": s.select_visible, "select_rows": s.select_rows, "L": L}
    topk = Counts(dram=B * (4 * s.select_visible + reread * 4 * (s.select_visible
                                                                 + 3 * s.long_visible)
                            + 4 * L * k),
                  l1=B * (fitted(coef, "topk_radix", vt) + 3 * s.long_visible / 32.0),
                  launches=chunks)
    groups = -(-H // 16)
    kv = 2 * e * L * D  # one K and one V head (MQA)
    gathered = 2 * e * D * s.selected * -(-H // 64)  # K/V rows each block gathers
    miss = max(0.0, 1.0 - l2_bytes / kv) if kv > l2_bytes else 0.0
    attention = Counts(
        flops_tc=B * MMA_FLOPS * D * groups * s.atiles,
        dram=B * (2 * e * H * L * D + 4 * H * L + kv + 4 * TILE * s.atiles + miss * gathered),
        l1=B * fitted(coef, "sparse_mma", {"atiles": s.atiles, "L": L, "D": D}) * groups,
        launches=1, crit_flops_tc=MMA_FLOPS * D * groups * -(-min(k, L) // TILE))
    return {"indexer": indexer, "top-k": topk, "attention": attention}


# ---- fitting the count models to the profile ---------------------------------------------------

def geometry_of(spec, L, causal):
    """The tile geometry of a pattern spec the profile runs (the kinds this model builds):
    none (dense), window, causal_window, dilated, ladder (b = 64), bigbird (b a multiple of 64,
    not causal)."""
    if spec in (None, "", "none", "dense"):
        return dense_geometry(L, causal)
    kind, _, params = spec.partition(":")
    if "+" in spec:  # a union of patterns (e.g. sink + window): no geometry of its own here
        kind = "union"
    p = {a: int(b) for a, b in (x.split("=") for x in params.split(","))} if params and \
        kind != "union" else {}
    if kind == "window":
        return band_geometry(L, -p["w"], p["w"], causal)
    if kind == "causal_window":
        return band_geometry(L, 1 - p["w"], 0, causal)
    if kind == "dilated" and not causal:
        return dilated_geometry(L, p["w"], p["d"])
    if kind == "ladder" and causal and p.get("b") == TILE:
        return ladder_geometry(L, p["w"], p.get("s", 1))
    if kind == "bigbird" and not causal:
        return bigbird_geometry(L, p["b"], p["r"])
    raise ValueError(f"geometry_of: no tile geometry for '{spec}' (causal={causal}) here")


def record_quantities(r):
    """The quantities of COUNT_TERMS for a profile record (per sequence and head)."""
    L, D = r["Lq"], r["D"]
    v = {"L": L, "D": D}
    if r["example"] == "05_deepseek_sparse":
        s = dsa_sums(L, r["topk"], r["causal"])
        v.update(s.__dict__)
        return v
    geo = geometry_of("none" if r["kernel"] == "dense_fa2" else r["pattern"], L, r["causal"])
    v.update(tiles=geo.tiles, qtiles=geo.qtiles, nnz=geo.entries, geo=geo)
    return v


def measured_l1(r):
    p = r["profile"]
    return p["shared_wavefronts"] + p["global_sectors"] / 4.0


def independent_columns(xs, tol=1e-9):
    """Indices of columns of xs (rows) that are linearly independent of the ones before them
    (Gram-Schmidt): terms the records cannot tell apart (one D only) are left out of a fit."""
    basis, keep = [], []
    for j in range(len(xs[0])):
        v = [x[j] for x in xs]
        norm0 = math.sqrt(sum(t * t for t in v)) or 1.0
        for u in basis:
            d = sum(a * b for a, b in zip(v, u))
            v = [a - d * b for a, b in zip(v, u)]
        n = math.sqrt(sum(t * t for t in v))
        if n > tol * norm0:
            basis.append([t / n for t in v])
            keep.append(j)
    return keep


def lstsq_relative(rows, ys):
    """Coefficients c minimising sum((row . c - y) / y)^2 (io_complexity.solve on the normal
    equations); a term the rows cannot separate from the others gets 0."""
    import io_complexity
    xs = [[t / y for t in row] for row, y in zip(rows, ys)]
    keep = independent_columns(xs)
    a = [[sum(x[i] * x[j] for x in xs) for j in keep] for i in keep]
    b = [sum(x[i] for x in xs) for i in keep]
    c = [0.0] * len(rows[0])
    for i, v in zip(keep, io_complexity.solve(a, b)):
        c[i] = v
    return c


def fit_counts(records, hold_out_largest=True):
    """Coefficients of every fitted count, per kernel name, from profile records (the records of
    the largest L of each kernel left out of the fit when hold_out_largest: they check the
    extrapolation). {kernel: [coefficients]}."""
    by = {}
    for r in records:
        if r["kernel"] in FAMILY:
            by.setdefault(r["kernel"], []).append(r)
    coef = {}
    for kernel, recs in by.items():
        terms = COUNT_TERMS[FAMILY[kernel]]
        top = max(r["Lq"] for r in recs)
        use = [r for r in recs if not hold_out_largest or r["Lq"] < top] or recs
        rows = [term_values(terms, record_quantities(r)) for r in use]
        coef[kernel] = lstsq_relative(rows, [measured_l1(r) for r in use])
    return coef


def model_counts_of_record(r, coef):
    """The count model's Counts for the problem of a profile record (one kernel, one launch set)."""
    B, H, L, D, dt = r["B"], r["H"], r["Lq"], r["D"], r["dtype"]
    if r["example"] == "05_deepseek_sparse":
        st = dsa_stage_counts(B, H, L, D, r["topk"], dt, coef, r.get("index_heads") or 16,
                              r.get("index_dim") or 64, r["causal"])
        if r["kernel"] == "end_to_end":
            return st["indexer"] + st["top-k"] + st["attention"]
        return st[{"indexer": "indexer", "topk_radix": "top-k", "sparse_mma": "attention"}[
            r["kernel"]]]
    v = record_quantities(r)
    if r["kernel"] == "gather":
        return gather_counts(v["geo"], B, H, D, dt, coef)
    return fa2_counts(r["kernel"], v["geo"], B, H, D, dt, coef,
                      metadata=r["kernel"] == "block_sparse")


def measured_counts(r, model):
    """The profile's counts of a record, with what the profile does not count (integer ops of the
    mask, the span) taken from the model's counts."""
    p = r["profile"]
    flops_tc = p["mma"] * MMA_FLOPS
    return replace(model, flops_tc=flops_tc, flops_cc=0.0 if p["mma"] else model.flops_cc,
                   dram=p["dram_bytes"], l1=measured_l1(r), launches=p["launches"])


# ---- fitting the device's parameters to GPU measurements --------------------------------------

FIT_PARAMS = ("eta_tensor", "eta_cuda", "t_launch", "l1_scale", "mask_scale")


def with_fit(dev, x):
    """dev with the fitted parameters x (FIT_PARAMS order): the efficiencies and the launch time
    replaced, the L1 rate and the INT32 rate (the masks) scaled."""
    d = dict(dev)
    d["eta_tensor"], d["eta_cuda"], d["t_launch"] = x[0], x[1], x[2]
    d["l1_wavefronts_per_clk"] = dev["l1_wavefronts_per_clk"] * x[3]
    d["int32_per_clk"] = dev["int32_per_clk"] * x[4]
    return d


def fit_errors(samples, dev):
    """Relative errors of the modelled times of samples [(stages, measured seconds)]."""
    return [pipeline_time(st, dev)[1] / t - 1.0 for st, t in samples]


def nelder_mead(f, x0, steps, iters=600):
    """Minimises f from x0 (the downhill simplex of Nelder and Mead; standard coefficients)."""
    pts = [list(x0)] + [[x + (s if i == j else 0.0) for j, x in enumerate(x0)]
                        for i, s in enumerate(steps)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=vals.__getitem__)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centre = [sum(p[j] for p in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        refl = [c + (c - w) for c, w in zip(centre, pts[-1])]
        fr = f(refl)
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centre, pts[-1])]
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centre, pts[-1])]
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                pts = [pts[0]] + [[b + 0.5 * (p - b) for b, p in zip(pts[0], q)] for q in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    best = min(range(len(pts)), key=vals.__getitem__)
    return pts[best]


def fit_device(samples, dev):
    """The parameters FIT_PARAMS that make the model's times closest to measured ones (least
    squares of log(model / measured); samples [(stages, seconds)]): (fitted dict, errors dict
    with the largest and the RMS relative error)."""
    x0 = [dev["eta_tensor"], dev["eta_cuda"], dev["t_launch"], 1.0, 1.0]

    def loss(logx):
        x = [math.exp(v) for v in logx]
        if x[0] > 1.0 or x[1] > 1.0:
            return 1e9
        return sum(math.log1p(e) ** 2 for e in fit_errors(samples, with_fit(dev, x)))
    logx = nelder_mead(loss, [math.log(v) for v in x0], [0.3] * len(x0))
    x = [math.exp(v) for v in logx]
    errs = fit_errors(samples, with_fit(dev, x))
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    return dict(zip(FIT_PARAMS, x)), {"max": max(abs(e) for e in errs), "rms": rms}
