#!/usr/bin/env python3
"""On-paper model of tensor parallelism (TP), pipeline parallelism (PP) and prefill/decode
disaggregation for N nodes and a given link (issue 21), calibrated by measurements taken on
this machine (bench/distributed.sh passes them in):

  --tpot-s        one process's decode time per token (seconds), whole machine
  --prefill-tok-s one process's prefill speed (tokens/s), whole machine
  --latency-s     MPI one-way latency on loopback (bench_mpi_link)
  --bandwidth     MPI bandwidth on loopback, bytes/s (bench_mpi_link)
  --dim --layers --kv-dim --vocab   the model's shape

Assumptions, stated once:
  * a node is this machine (same cores, same memory bandwidth): compute per token divides by
    N under TP (each node streams 1/N of the weights: decode is bandwidth bound) and stays
    whole per stage under PP (each stage runs 1/N of the layers, one after the other);
  * TP reduces rows x dim f32 twice per layer with a ring all-reduce:
      2 (N-1) alpha + 2 (N-1)/N bytes / beta, and gathers V/N f32 logits per row at the end;
  * PP sends rows x dim f32 across N-1 stage boundaries and the outputs back to stage 0;
    rapide's steps do not overlap, so with m micro-batches a step's bubble is (N-1)/(m+N-1),
    and a bandwidth-bound stage streams its weights once per micro-batch (so PP buys memory
    capacity, not decode speed, on CPUs);
  * disaggregation moves 2 x layers x kv_dim f16 values per prompt token once, overlapped
    with the next prefill; its cost is that transfer on the long prompt's TTFT;
  * link latency: 10 Gb/s Ethernet (TCP) 15 us, 100 and 400 Gb/s (RDMA) 2 us; loopback
    uses the measured figures.
Prints a table (and --json for the figures).
"""
import argparse
import json

LINKS = [("loopback", None, None), ("10 Gb/s", 10e9 / 8, 15e-6), ("100 Gb/s", 100e9 / 8, 2e-6),
         ("400 Gb/s", 400e9 / 8, 2e-6)]


def ring_allreduce(n, nbytes, alpha, beta):
    if n == 1:
        return 0.0
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / beta


def tp_step(a, n, rows, alpha, beta, compute):
    """Seconds of one TP forward pass over `rows` tokens whose one-process compute is `compute`."""
    reduce = 2 * a.layers * ring_allreduce(n, rows * a.dim * 4, alpha, beta)
    gather = (n - 1) * alpha + (n - 1) / n * a.vocab * 4 / beta if n > 1 else 0.0
    broadcast = alpha * max(1, (n - 1).bit_length()) if n > 1 else 0.0
    return compute / n + reduce + gather + broadcast, reduce + gather + broadcast


def pp_step(a, n, rows, micro, alpha, beta, compute):
    """rapide's step-synchronous PP pass: `micro` micro-batches flow through n stages. A stage
    runs 1/n of the layers; decode on a CPU is bandwidth bound, so a micro-batch costs a
    stage compute / n whatever its rows (its layers' weights are streamed again). Returns
    (seconds, seconds on links, bubble fraction)."""
    m = max(1, min(micro, rows))
    hop = alpha + rows / m * a.dim * 4 / beta
    links = (n - 1 + 1) * hop if n > 1 else 0.0  # stage to stage, then the outputs to stage 0
    total = (m + n - 1) * compute / n + links
    return total, links, (n - 1) / (m + n - 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tpot-s", type=float, required=True)
    p.add_argument("--prefill-tok-s", type=float, required=True)
    p.add_argument("--latency-s", type=float, required=True)
    p.add_argument("--bandwidth", type=float, required=True)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--kv-dim", type=int, default=256)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--prompt", type=int, default=2000, help="long prompt tokens (TTFT, KV moved)")
    p.add_argument("--batch", type=int, default=32, help="decode rows per step for throughput")
    p.add_argument("--nodes", default="1,2,4,8")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = []
    for name, beta, alpha in LINKS:
        beta = beta or a.bandwidth
        alpha = alpha or a.latency_s
        for n in [int(x) for x in a.nodes.split(",")]:
            # Decode, one sequence: TPOT. Decode, a batch: tokens/s (weights read once per step,
            # so a batch step costs about one token's time on a bandwidth-bound CPU).
            tp_tpot, tp_comm = tp_step(a, n, 1, alpha, beta, a.tpot_s)
            pp_tpot, _, _ = pp_step(a, n, 1, 1, alpha, beta, a.tpot_s)
            tp_batch, _ = tp_step(a, n, a.batch, alpha, beta, a.tpot_s)
            pp_batch, _, bubble = pp_step(a, n, a.batch, n, alpha, beta, a.tpot_s)
            prefill = a.prompt / a.prefill_tok_s
            tp_ttft, _ = tp_step(a, n, a.prompt, alpha, beta, prefill)
            kv_bytes = a.prompt * 2 * a.layers * a.kv_dim * 2
            rows.append({
                "link": name, "nodes": n,
                "tp_tpot_ms": tp_tpot * 1e3, "tp_comm_share": tp_comm / tp_tpot,
                "tp_batch_tok_s": a.batch / tp_batch,
                # PP: one sequence walks every stage (each 1/n of the layers on its own node).
                "pp_tpot_ms": pp_tpot * 1e3,
                "pp_batch_tok_s": a.batch / pp_batch,
                "pp_bubble": bubble,
                "tp_ttft_s": tp_ttft,
                "disagg_kv_mib": kv_bytes / 2**20,
                "disagg_transfer_ms": (alpha + kv_bytes / beta) * 1e3,
            })
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    head = ("link", "N", "TP TPOT ms", "TP comm %", "TP tok/s@B", "PP TPOT ms", "PP tok/s@B",
            "PP bubble", "TP TTFT s", "KV MiB", "KV move ms")
    print(" | ".join(f"{h:>10}" for h in head))
    for r in rows:
        print(" | ".join(f"{v:>10}" for v in (
            r["link"], r["nodes"], f"{r['tp_tpot_ms']:.2f}", f"{100 * r['tp_comm_share']:.0f}",
            f"{r['tp_batch_tok_s']:.0f}", f"{r['pp_tpot_ms']:.2f}", f"{r['pp_batch_tok_s']:.0f}",
            f"{r['pp_bubble']:.2f}", f"{r['tp_ttft_s']:.2f}", f"{r['disagg_kv_mib']:.1f}",
            f"{r['disagg_transfer_ms']:.2f}")))


if __name__ == "__main__":
    main()
