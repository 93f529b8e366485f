"""Draws results/losses.svg from results/losses_target.csv and losses_draft.csv (plain Python, no
plotting library): training loss (thin) and held-out loss (dots) against tokens seen.
Usage: python3 plot_losses.py [RESULTS_DIR]"""
import csv
import os
import sys


def read(path):
    rows = list(csv.DictReader(open(path)))
    train = [(int(r["tokens"]), float(r["train_loss"])) for r in rows]
    val = [(int(r["tokens"]), float(r["val_loss"])) for r in rows if r["val_loss"]]
    qat = next((int(r["tokens"]) for r in rows if r["qat"] == "1"), None)
    return train, val, qat


def smooth(points, k=15):
    out = []
    for i in range(len(points)):
        w = points[max(0, i - k + 1):i + 1]
        out.append((points[i][0], sum(p[1] for p in w) / len(w)))
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    series = {"target": read(os.path.join(d, "losses_target.csv")), "draft": read(os.path.join(d, "losses_draft.csv"))}
    colors = {"target": "#1f5fbf", "draft": "#d0641a"}
    W, H, L, R, T, B = 760, 440, 60, 20, 40, 50
    xmax = max(p[0] for s in series.values() for p in s[0])
    ymin, ymax = 2.0, 9.0
    X = lambda x: L + (W - L - R) * x / xmax
    Y = lambda y: T + (H - T - B) * (ymax - min(max(y, ymin), ymax)) / (ymax - ymin)
    el = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
          f'<rect width="{W}" height="{H}" fill="white"/>',
          f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">Default model pair: loss (nats/token) vs tokens seen</text>']
    for y in range(int(ymin), int(ymax) + 1):
        el.append(f'<line x1="{L}" x2="{W - R}" y1="{Y(y):.1f}" y2="{Y(y):.1f}" stroke="#ddd"/>')
        el.append(f'<text x="{L - 8}" y="{Y(y) + 4:.1f}" text-anchor="end">{y}</text>')
    step = 2_000_000
    for x in range(0, xmax + 1, step):
        el.append(f'<line x1="{X(x):.1f}" x2="{X(x):.1f}" y1="{T}" y2="{H - B}" stroke="#eee"/>')
        el.append(f'<text x="{X(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x / 1e6:.0f}M</text>')
    el.append(f'<text x="{W / 2}" y="{H - 10}" text-anchor="middle">tokens seen</text>')
    for i, (name, (train, val, qat)) in enumerate(series.items()):
        c = colors[name]
        pts = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in smooth(train))
        el.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
        for x, y in val:
            el.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3.5" fill="white" stroke="{c}" stroke-width="1.5"/>')
        if qat is not None:
            el.append(f'<line x1="{X(qat):.1f}" x2="{X(qat):.1f}" y1="{T}" y2="{H - B}" stroke="{c}" stroke-dasharray="4 3"/>')
        ly = T + 18 + 18 * i
        el.append(f'<line x1="{W - 290}" x2="{W - 266}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        el.append(f'<text x="{W - 260}" y="{ly + 4}">{name}: train (smoothed), o held-out, -- QAT start</text>')
    el.append("</svg>")
    with open(os.path.join(d, "losses.svg"), "w") as fh:
        fh.write("\n".join(el) + "\n")


if __name__ == "__main__":
    main()
