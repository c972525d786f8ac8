#!/usr/bin/env python3
"""context_parallel.py — example 11's algorithms in PyTorch, written as they read: ring attention
(pass-KV, contiguous or zigzag shards; a document mask, a sliding window) with torch.distributed's
send/recv, the Ulysses all-to-all, and DeepSeek sparse attention across ranks (indexer keys
all-gathered, a global top-k, the selected K/V fetched), on the gloo backend (CPU processes; the
algorithm is the same on NCCL).

  python examples/11_context_parallel/context_parallel.py --ranks 3 --strategy zigzag --causal

compares the gathered result with scaled_dot_product_attention on the whole problem in one
process. The chunk layout is cp_layout.h's: chunk c of n starts at floor(c L / n).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

torch, dist, mp, F = require("torch", "torch.distributed", "torch.multiprocessing",
                             "torch.nn.functional", setup="--python")


def chunk(L, n, c):
    return c * L // n, (c + 1) * L // n


def rank_chunks(strategy, L, P, r):
    """The position ranges [a, b) rank r holds."""
    if strategy == "zigzag":
        return [chunk(L, 2 * P, r), chunk(L, 2 * P, 2 * P - 1 - r)]
    return [chunk(L, P, r)]


def partial_attention(q, k, v, q_pos, k_pos, causal, doc=None, window=None):
    """Attention of queries at positions q_pos over keys at k_pos: (O, LSE), LSE = -inf and O = 0
    for a row that sees no key. doc: each position's document (a document mask), or None; window:
    a sliding window of that many keys, i - window < j (with causal), or None."""
    s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    if doc is not None:
        s = s.masked_fill(doc[k_pos][None, :] != doc[q_pos][:, None], float("-inf"))
    if window is not None:
        s = s.masked_fill(q_pos[:, None] - k_pos[None, :] >= window, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None].masked_fill(lse[..., None] == float("-inf"), 0.0))
    return p @ v, lse


def merge(o1, lse1, o2, lse2):
    """Two partial results of the same rows over disjoint keys -> the result over both keys:
    the log-sum-exp makes attention associative."""
    lse = torch.logaddexp(lse1, lse2)
    safe = lse.masked_fill(lse == float("-inf"), 0.0)
    w1, w2 = torch.exp(lse1 - safe), torch.exp(lse2 - safe)
    return w1[..., None] * o1 + w2[..., None] * o2, lse


def ring_attention(q, k, v, pos, causal, doc=None, window=None):
    """pass-KV: this rank's queries stay; the K/V shards go round the ring, P steps; each step's
    partial result is merged into the running one. q, k, v: [B, H, n, D] at positions pos."""
    rank, P = dist.get_rank(), dist.get_world_size()
    o = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    kv = torch.cat([k, v, pos[None, None, :, None].to(q.dtype).expand(*k.shape[:2], -1, 1)], -1)
    for step in range(P):
        if step < P - 1:  # the next shard travels while this one is used
            # shards differ in length when P does not divide L: sizes first
            n = torch.tensor([kv.shape[2]])
            size = torch.zeros(1, dtype=torch.long)
            reqs = [dist.isend(n, (rank + 1) % P), dist.irecv(size, (rank - 1) % P)]
            for r in reqs:
                r.wait()
            nxt = torch.empty(*kv.shape[:2], int(size), kv.shape[3], dtype=kv.dtype)
            reqs = [dist.isend(kv.contiguous(), (rank + 1) % P), dist.irecv(nxt, (rank - 1) % P)]
        D = q.shape[-1]
        kk, vv, kpos = kv[..., :D], kv[..., D:2 * D], kv[0, 0, :, 2 * D].long()
        o_s, lse_s = partial_attention(q, kk, vv, pos, kpos, causal, doc, window)
        o, lse = merge(o, lse, o_s, lse_s)
        if step < P - 1:
            for r in reqs:
                r.wait()
            kv = nxt
    return o, lse


def ulysses_attention(q, k, v, pos, L, causal):
    """all-to-all: every position of H/P heads in, attention, this rank's positions of every head
    back. Uses the contiguous layout (pos = this rank's chunk)."""
    rank, P = dist.get_rank(), dist.get_world_size()
    H = q.shape[1]
    heads = [(g * H // P, (g + 1) * H // P) for g in range(P)]
    lens = [chunk(L, P, g)[1] - chunk(L, P, g)[0] for g in range(P)]

    def exchange(parts_out, shapes_in):
        """All-to-all with a part of its own size for each peer (gloo's all_to_all wants equal
        parts): a send and a receive per peer."""
        parts_in = [torch.empty(s, dtype=q.dtype) for s in shapes_in]
        parts_in[rank] = parts_out[rank]
        reqs = []
        for g in range(P):
            if g != rank:
                reqs += [dist.isend(parts_out[g].contiguous(), g), dist.irecv(parts_in[g], g)]
        for r in reqs:
            r.wait()
        return parts_in

    h0, h1 = heads[rank]
    qkv = torch.cat([q, k, v], -1)
    got = exchange([qkv[:, a:b] for a, b in heads],
                   [(q.shape[0], h1 - h0, n, 3 * q.shape[-1]) for n in lens])
    full = torch.cat(got, 2)  # [B, H/P, L, 3D], positions in order
    D = q.shape[-1]
    all_pos = torch.arange(L)
    o, lse = partial_attention(full[..., :D], full[..., D:2 * D], full[..., 2 * D:], all_pos,
                               all_pos, causal)
    ol = torch.cat([o, lse[..., None]], -1)
    starts = [chunk(L, P, g)[0] for g in range(P)]
    back = exchange([ol[:, :, s:s + n] for s, n in zip(starts, lens)],
                    [(q.shape[0], b - a, q.shape[2], D + 1) for a, b in heads])
    ol = torch.cat(back, 1)
    return ol[..., :D], ol[..., D]


def index_scores(qi, ki, w):
    """The lightning indexer (example 05): I[i, s] = sum_j w[i, j] ReLU(q^I[i, j] . k^I[s]) for
    queries qi [n, HI, DI] with head weights w [n, HI] against keys ki [m, DI]: [n, m]."""
    return torch.einsum("nh,nhm->nm", w, torch.relu(torch.einsum("nhd,md->nhm", qi, ki)))


def select_topk(scores, q_pos, k):
    """Each query's k best keys among positions 0 .. its own (scores: [n, L]), ties to the lowest
    position: ascending positions, -1 past the visible keys."""
    L = scores.shape[-1]
    s = scores.masked_fill(torch.arange(L)[None, :] > q_pos[:, None], float("-inf"))
    best = torch.argsort(-s, dim=-1, stable=True)[:, :k]  # stable: equal scores by position
    best = torch.where(torch.gather(s, 1, best) > float("-inf"), best, L).sort(-1).values
    return torch.where(best == L, -1, best)


def dsa_attention(q, kv, qi, ki, w, pos, L, topk, owners):
    """DeepSeek sparse attention across ranks, for this rank's positions pos: q [B, H, n, D]; kv
    [B, n, 2D] (K and V of one shared head); qi [B, n, HI, DI], ki [B, n, DI], w [B, n, HI];
    owners: every rank's positions. 1. all-gather of the indexer keys; 2. top-k over the whole
    causal prefix; 3. the selected K/V rows this rank does not own fetched from their owners
    (which rows: all-gathered lists; the rows: a send and a receive per peer); 4. attention over
    the selection. Returns (O, LSE, selection [B, n, topk])."""
    rank, P = dist.get_rank(), dist.get_world_size()
    B, D = q.shape[0], q.shape[-1]
    got = [None] * P
    dist.all_gather_object(got, ki)
    KI = torch.empty(B, L, ki.shape[-1], dtype=ki.dtype)
    for g in range(P):
        KI[:, owners[g]] = got[g]
    sel = torch.stack([select_topk(index_scores(qi[b], KI[b], w[b]), pos, topk)
                       for b in range(B)])
    owner = torch.empty(L, dtype=torch.long)
    for g in range(P):
        owner[owners[g]] = g
    rows = (torch.arange(B)[:, None, None] * L + sel)[sel >= 0].unique()  # b * L + position
    rows = rows[owner[rows % L] != rank]
    asks = [None] * P
    dist.all_gather_object(asks, [rows[owner[rows % L] == g] for g in range(P)])
    KV = torch.zeros(B * L, 2 * D, dtype=kv.dtype)
    KV.view(B, L, 2 * D)[:, pos] = kv
    replies = [KV[asks[g][rank]].contiguous() for g in range(P)]  # rows rank g asked of me
    parts = [torch.empty(len(asks[rank][g]), 2 * D, dtype=kv.dtype) for g in range(P)]
    reqs = []
    for g in range(P):
        if g != rank:
            reqs += [dist.isend(replies[g], g), dist.irecv(parts[g], g)]
    for r in reqs:
        r.wait()
    for g in range(P):
        if g != rank:
            KV[asks[rank][g]] = parts[g]
    KV = KV.view(B, L, 2 * D)
    picked = torch.stack([KV[b][sel[b].clamp(min=0)] for b in range(B)])  # [B, n, k, 2D]
    s = torch.einsum("bhnd,bnkd->bhnk", q, picked[..., :D]) / D ** 0.5
    s = s.masked_fill((sel < 0)[:, None], float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.einsum("bhnk,bnkd->bhnd", torch.exp(s - lse[..., None]), picked[..., D:])
    return o, lse, sel


def dsa_case(rank, P, args):
    """DeepSeek sparse attention on this rank; on rank 0, the gathered result against SDPA over
    the selection that torch.topk makes on the whole problem's index scores in one process (and
    the gathered selection against that one)."""
    torch.manual_seed(args.seed)
    B, H, L, D, HI, DI, K = args.B, args.H, args.L, args.D, 4, 8, args.dsa
    q = torch.rand(B, H, L, D, dtype=torch.float64) * 2 - 1
    kv = torch.rand(B, L, 2 * D, dtype=torch.float64) * 2 - 1
    qi = torch.rand(B, L, HI, DI, dtype=torch.float64) * 2 - 1
    ki = torch.rand(B, L, DI, dtype=torch.float64) * 2 - 1
    w = torch.rand(B, L, HI, dtype=torch.float64)
    owners = [torch.cat([torch.arange(a, b) for a, b in rank_chunks(args.strategy, L, P, g)])
              for g in range(P)]
    pos = owners[rank]
    o, lse, sel = dsa_attention(q[:, :, pos], kv[:, pos], qi[:, pos], ki[:, pos], w[:, pos], pos,
                                L, K, owners)
    gathered = [None] * P
    dist.all_gather_object(gathered, (pos, o, lse, sel))
    if rank != 0:
        return None
    O, LSE = torch.empty(B, H, L, D, dtype=q.dtype), torch.empty(B, H, L, dtype=q.dtype)
    SEL = torch.empty(B, L, K, dtype=torch.long)
    for p, o_r, l_r, s_r in gathered:
        O[:, :, p], LSE[:, :, p], SEL[:, p] = o_r, l_r, s_r
    # the reference: torch.topk per query over its visible keys (random scores: no ties)
    allowed = torch.zeros(B, L, L, dtype=torch.bool)
    same = True
    for b in range(B):
        scores = torch.einsum("ih,ihs->is", w[b], torch.relu(qi[b] @ ki[b].T[None]))
        for i in range(L):
            top = torch.topk(scores[i, :i + 1], min(K, i + 1)).indices.sort().values
            allowed[b, i, top] = True
            same = same and torch.equal(SEL[b, i, :len(top)], top) and bool(
                (SEL[b, i, len(top):] == -1).all())
    want = F.scaled_dot_product_attention(q, kv[:, None, :, :D].expand(B, H, L, D),
                                          kv[:, None, :, D:].expand(B, H, L, D),
                                          attn_mask=allowed[:, None])
    s = (q @ kv[:, None, :, :D].transpose(-1, -2) / D ** 0.5).masked_fill(~allowed[:, None],
                                                                           float("-inf"))
    err_o = (O - want).abs().max().item()
    return (err_o if same else float("inf")), (LSE - torch.logsumexp(s, -1)).abs().max().item()


def one_case(rank, P, args):
    """One problem on this rank; on rank 0, the gathered result's largest differences from SDPA
    (output) and from the log-sum-exp of the whole problem computed in one process."""
    if args.dsa:
        return dsa_case(rank, P, args)
    torch.manual_seed(args.seed)
    B, H, L, D = args.B, args.H, args.L, args.D
    q, k, v = (torch.rand(B, H, L, D, dtype=torch.float64) * 2 - 1 for _ in range(3))
    ranges = rank_chunks("ring" if args.strategy == "ulysses" else args.strategy, L, P, rank)
    pos = torch.cat([torch.arange(a, b) for a, b in ranges])
    doc = None  # document d owns the positions of its length, in order
    if args.docs:
        doc = torch.repeat_interleave(torch.arange(len(args.docs)), torch.tensor(args.docs))
    if args.strategy == "ulysses":
        o, lse = ulysses_attention(q[:, :, pos], k[:, :, pos], v[:, :, pos], pos, L, args.causal)
    else:
        o, lse = ring_attention(q[:, :, pos], k[:, :, pos], v[:, :, pos], pos, args.causal, doc,
                                args.window)
    gathered = [None] * P
    dist.all_gather_object(gathered, (pos, o, lse))
    if rank != 0:
        return None
    O = torch.empty(B, H, L, D, dtype=q.dtype)
    LSE = torch.empty(B, H, L, dtype=q.dtype)
    for p, o_r, l_r in gathered:
        O[:, :, p], LSE[:, :, p] = o_r, l_r
    allowed = torch.ones(L, L, dtype=torch.bool)
    if args.causal:
        allowed &= torch.ones(L, L, dtype=torch.bool).tril()
    if doc is not None:
        allowed &= doc[:, None] == doc[None, :]
    if args.window is not None:
        allowed &= torch.arange(L)[:, None] - torch.arange(L)[None, :] < args.window
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    s = ((q @ k.transpose(-1, -2)) / D ** 0.5).masked_fill(~allowed, float("-inf"))
    return (O - want).abs().max().item(), (LSE - torch.logsumexp(s, -1)).abs().max().item()


def run_rank(rank, P, cases, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=P)
    results = [one_case(rank, P, c) for c in cases]
    if rank == 0:
        out.put(results)
    dist.destroy_process_group()


def run(ranks, cases, port=29611):
    """Each case (an argparse.Namespace: strategy, causal, B, H, L, D, seed) on `ranks` processes
    (one process group for them all): [(max |O - SDPA|, max |LSE - logsumexp|)] per case."""
    ctx = mp.get_context("fork")  # the children inherit the imported torch: quick to start
    out = ctx.Queue()
    procs = [ctx.Process(target=run_rank, args=(r, ranks, cases, port, out)) for r in range(ranks)]
    for p in procs:
        p.start()
    try:
        results = out.get(timeout=60)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return results


def case(strategy, causal, B=1, H=3, L=37, D=16, seed=0, docs=None, window=None, dsa=None):
    """One problem; docs: document lengths summing to L (ring and zigzag), or None; window: a
    sliding window of that many keys (ring and zigzag, causal), or None; dsa: DeepSeek sparse
    attention with that top-k (ring and zigzag layouts, causal), or None."""
    return argparse.Namespace(strategy=strategy, causal=causal, B=B, H=H, L=L, D=D, seed=seed,
                              docs=docs, window=window, dsa=dsa)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--strategy", choices=["ring", "zigzag", "ulysses"], default="ring")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("-L", type=int, default=37)
    ap.add_argument("--window", type=int, default=None,
                    help="a sliding window of W keys (ring, zigzag; implies --causal)")
    ap.add_argument("--dsa", type=int, default=None,
                    help="DeepSeek sparse attention, top-K (ring or zigzag layout; causal)")
    args = ap.parse_args()
    for flag, value in (("--window", args.window), ("--dsa", args.dsa)):
        if value is not None and (value < 1 or args.strategy == "ulysses"):
            ap.error(f"{flag} takes a positive count, with --strategy ring or zigzag")
    if args.dsa is not None and (args.window is not None or args.dsa > args.L):
        ap.error("--dsa takes at most -L keys, and no --window")
    causal = args.causal or args.window is not None or args.dsa is not None
    [(err_o, err_l)] = run(args.ranks, [case(args.strategy, causal, L=args.L, window=args.window,
                                             dsa=args.dsa)])
    print(f"{args.strategy}, {args.ranks} ranks (gloo): max |O - SDPA| {err_o:.2e}, "
          f"max |LSE - logsumexp| {err_l:.2e}")
    return 0 if max(err_o, err_l) < 1e-10 else 1


if __name__ == "__main__":
    sys.exit(main())
