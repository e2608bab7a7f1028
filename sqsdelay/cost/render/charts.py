"""The report's charts (matplotlib), as inline SVG."""

from __future__ import annotations

import io
from typing import Any

from sqsdelay.cost.summary import MODEL_TITLES, Report

MONTH_LABELS = 24  # the most month labels on the monthly chart's axis


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def charts(report: Report) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FuncFormatter

    cur = report.summary["currency"]
    thousands = FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 10 or v == 0 else f"{v:,.2f}")
    out = {}
    month = report.tables["by_month"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    # Long delays spread a year of sends over many usage months (years, with delays of
    # years): a label per month made hundreds of ticks, most of the report's drawing time,
    # and unreadable. At most MONTH_LABELS of them are labelled, evenly spaced.
    x = list(range(len(month)))
    style: Any
    for model, style in (
        ("reference", "--"),
        ("exact", ":"),
        ("batched", "-"),
        ("parked", (0, (5, 1, 1, 1))),
        ("scheduler", "-."),
    ):
        ax.plot(
            x,
            month[f"{model}_cost"],
            linestyle=style,
            marker="o",
            label=MODEL_TITLES[model],
        )
    ax.bar(x, month["estimated_cost"], alpha=0.25, label="Estimated (batched + idle, tiers)")
    step = -(-len(x) // MONTH_LABELS) or 1
    ax.set_xticks(x[::step], [str(m) for m in month.index[::step]])
    ax.set_ylabel(cur)
    ax.yaxis.set_major_formatter(thousands)
    ax.set_title("Estimated cost per usage month")
    ax.tick_params(axis="x", labelrotation=45)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    out["month"] = _svg(fig)
    plt.close(fig)

    dest = report.tables["by_destination"].head(15).iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(dest) + 1.2))
    ax.barh(dest.index, dest["batched_cost"] + dest["idle_poll_cost"], color="#3b6ea5")
    ax.set_xlabel(cur)
    ax.xaxis.set_major_formatter(thousands)
    ax.set_title("Cost per destination (batched + idle polling, top 15)")
    out["destination"] = _svg(fig)
    plt.close(fig)

    hist = report.tables["delay_histogram"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(hist)), hist["messages"], color="#6a994e")
    ax.set_xticks(range(len(hist)), hist.index, rotation=60, fontsize=7, ha="right")
    ax.set_ylabel("messages")
    ax.yaxis.set_major_formatter(thousands)
    ax.set_title("Delay histogram (powers of two)")
    out["histogram"] = _svg(fig)
    plt.close(fig)
    return out
