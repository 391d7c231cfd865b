"""PyTorch's ``torch.utils.benchmark.Compare``: measurements side by side in a table per
label -- one column per description, one row per sub-label (grouped by thread count), each
cell the median in one time unit for the table."""

from __future__ import annotations

from collections.abc import Iterable

from .common import Measurement, ordered_unique, select_unit, trim_sigfig, unit_to_english

__all__ = ["Compare"]

_BEST = "\033[92m"      # green: the fastest of its column (or row)
_GOOD = "\033[34m"      # blue: within 10% of it
_BAD = "\033[2m\033[91m"  # dim red: 2x to 5x it
_VERY_BAD = "\033[31m"  # red: 5x or more
_BOLD = "\033[1m"
_TERMINATE = "\033[0m"


class Compare:
    """A table of :class:`Measurement` results (``print()``, ``str()``); see the module
    doc. ``trim_significant_figures()`` rounds each cell to the digits its spread supports,
    ``colorize(rowwise=False)`` marks each column's (row's) fastest and slowest, and
    ``highlight_warnings()`` adds ``(! IQR%)`` where a measurement warned."""

    def __init__(self, results: Iterable[Measurement]) -> None:
        self._results: list[Measurement] = []
        self.extend_results(results)
        self._trim = False
        self._colorize: str | None = None
        self._highlight_warnings = False

    def extend_results(self, results: Iterable[Measurement]) -> None:
        """Add measurements (replicates of one task are merged when the table is built)."""
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
            self._results.append(r)

    def trim_significant_figures(self) -> None:
        """Show each cell to its measurement's significant figures."""
        self._trim = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colour each cell against the fastest of its column (of its row: ``rowwise``)."""
        self._colorize = "row" if rowwise else "column"

    def highlight_warnings(self) -> None:
        """Mark cells whose measurement has a large interquartile range."""
        self._highlight_warnings = True

    def print(self) -> None:
        """Print the tables."""
        print(str(self))

    def __str__(self) -> str:
        merged = Measurement.merge(self._results)
        return "\n".join(self._table(label, [m for m in merged if m.label == label])
                         for label in ordered_unique(m.label for m in merged))

    # ------------------------------------------------------------------------ one table
    def _table(self, label, results: list[Measurement]) -> str:
        columns = ordered_unique(m.description for m in results)
        threads = ordered_unique(m.num_threads for m in results)
        rows = ordered_unique(m.as_row_name for m in results)
        cell = {(m.num_threads, m.as_row_name, m.description): m for m in results}
        unit, scale = select_unit(min(m.median for m in results))
        text: dict = {}
        for key, m in cell.items():
            value = m.median / scale
            if self._trim:
                digits = m.significant_figures
                value = trim_sigfig(value, digits)
                shown = f"{value:.{max(0, digits - len(str(int(value))))}f}"
            else:
                shown = f"{value:.1f}"
            if self._highlight_warnings and m.has_warnings:
                shown += f" (! {m.iqr / m.median * 100:.0f}%)"
            text[key] = shown
        name_w = max(len(str(r)) for r in rows)
        widths = [max([len(str(c or ""))] + [len(text[k]) for k in text if k[2] == c])
                  for c in columns]
        header = " " * name_w + "  |  " + "  |  ".join(
            str(c or "").center(w) for c, w in zip(columns, widths))
        total = len(header)
        lines = ["[" + f" {label or ''} ".center(total - 2, "-") + "]", header]
        for n in threads:
            group = f"{n} threads: "
            lines.append(group + "-" * max(total - len(group), 0))
            for r in rows:
                if not any((n, r, c) in cell for c in columns):
                    continue
                cells = [self._paint(text.get((n, r, c), ""), (n, r, c), cell, columns, rows)
                         .center(w + self._pad(text.get((n, r, c), ""), (n, r, c), cell,
                                               columns, rows))
                         for c, w in zip(columns, widths)]
                lines.append(str(r).rjust(name_w) + "  |  " + "  |  ".join(cells))
        lines += ["", f"Times are in {unit_to_english(unit)}s ({unit}).", ""]
        return "\n".join(lines)

    def _paint(self, shown: str, key, cell, columns, rows) -> str:
        if self._colorize is None or key not in cell:
            return shown
        n, r, c = key
        peers = [cell[k].median for k in cell
                 if (k[2] == c if self._colorize == "column" else k[:2] == (n, r))]
        if len(peers) < 2:
            return shown
        ratio = cell[key].median / min(peers)
        if ratio == 1.0:
            return f"{_BOLD}{_BEST}{shown}{_TERMINATE}"
        if ratio <= 1.1:
            return f"{_GOOD}{shown}{_TERMINATE}"
        if ratio >= 5:
            return f"{_VERY_BAD}{shown}{_TERMINATE}"
        if ratio >= 2:
            return f"{_BAD}{shown}{_TERMINATE}"
        return shown

    def _pad(self, shown: str, key, cell, columns, rows) -> int:
        """Width the colour codes add (invisible: centring must not count them)."""
        return len(self._paint(shown, key, cell, columns, rows)) - len(shown)
