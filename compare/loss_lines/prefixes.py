"""Launchers' rank prefixes (a family of their own in the corpus: horovodrun, mpirun, srun, torchrun,
mpiexec): each physical line cut into the pieces its writers wrote, each with the rank its prefix names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from compare.loss_lines.tokens import LossLogError

VERIFY_TAG = r"\[verify rank=(?P<tag>\d+) size=(?P<size>\d+)\]:"  # compare/verify/rank_tag writes it
BRACKETED = re.compile(r"\[(?:\d+,)?(?P<hvd>\d+)\]<std(?:out|err)>:|\[(?:rank|default)(?P<torch>\d+)\]:|"
                       + VERIFY_TAG)
SRUN_LABEL = re.compile(r"^\s*(?P<rank>\d+): ")
MPICH_LABEL = re.compile(r"^\[(?P<rank>\d+)\] ")  # Intel MPI and MPICH `mpiexec -prepend-rank`
TERMINAL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x08]")  # colours, cursor moves and backspaces of a progress bar


@dataclass(frozen=True)
class Piece:
    """One writer's line: the text after its prefixes, and what the prefixes said."""

    text: str
    line: int                  # the physical line it came from, from 1
    rank: int | None = None    # None: no prefix named a rank
    size: int | None = None    # the world size, from the verify tag
    repaint: int = 0           # which repaint of the line ("\r"-separated), from 0



def split_pieces(text: str) -> list[Piece]:
    """Each physical line cut at every prefix, each piece with the rank (and size) its prefixes name. A progress
    bar's repaints ("\r") are pieces of their line, with the rank of the line's prefix; terminal codes go."""
    lines = text.split("\n")
    labelled = [line for line in lines if line.strip()]
    labels = [label for label in (SRUN_LABEL, MPICH_LABEL)
              if labelled and sum(bool(label.match(line)) for line in labelled) * 2 > len(labelled)]
    pieces = []
    for number, line in enumerate(lines, start=1):
        line = TERMINAL.sub("", line)
        rank = None
        for label in labels:
            if found := label.match(line):
                rank, line = int(found["rank"]), line[found.end():]
                break
        starts = [match for match in BRACKETED.finditer(line)]
        if not starts:
            pieces += [Piece(part, number, rank, None, i) for i, part in _repaints(line)]
            continue
        if starts[0].start() > 0:  # a cut line before the first prefix
            pieces += [Piece(part, number, rank, None, i) for i, part in _repaints(line[:starts[0].start()])]
        size = None
        for match, following in zip(starts, [*starts[1:], None], strict=True):
            end = following.start() if following else len(line)
            piece_rank, size = _prefix_rank(match, size)
            body = line[match.end():end]
            if body or following is None:
                # prefixes nest ("[1,0]<stdout>:[verify rank=0 size=2]:..."): the innermost one decides
                pieces += [Piece(part, number, piece_rank, size, i) for i, part in _repaints(body)]
                size = None
    return pieces


def _repaints(text: str) -> list[tuple[int, str]]:
    parts = [(i, part) for i, part in enumerate(text.split("\r")) if part.strip()]
    return parts or [(0, text)]


def _prefix_rank(match: re.Match, size: int | None) -> tuple[int, int | None]:
    if match["tag"] is not None:
        return int(match["tag"]), int(match["size"])
    return int(match["hvd"] if match["hvd"] is not None else match["torch"]), size


def unglued(piece: Piece, patterns: list[re.Pattern]) -> list[Piece]:
    """A piece cut wherever one of the patterns starts a match, so that a match never spans two writers. A start
    inside a value that an earlier match reads (a named group: "123" of a step group not anchored on the left
    also matches as "23" and "3") is no new writer."""
    starts: set[int] = set()
    read: list[tuple[int, int]] = []  # spans of the named groups of the matches found
    kept: list[re.Match] = []
    for regex in patterns:
        position = 0
        while (found := regex.search(piece.text, position)) is not None:
            groups = {name: found.span(name) for name in regex.groupindex if found[name] is not None}
            # a later start of the same reading (a pattern with an optional head: "Epoch 1: 5%|..." and "5%|...")
            same = any(m.re is regex and m.start() < found.start() < m.end() and
                       all(m.span(name) == span for name, span in groups.items()) for m in kept)
            if not same and not any(a <= found.start() < b for a, b in read):
                starts.add(found.start())
                read += groups.values()
                kept.append(found)
            position = found.start() + 1
    if len(starts) <= 1:
        return [piece]
    bounds = sorted(starts)
    return [Piece(piece.text[a:b], piece.line, piece.rank, piece.size, piece.repaint)
            for a, b in zip(bounds, [*bounds[1:], len(piece.text)], strict=True)]



def rank_pieces(pieces: list[Piece], matching: dict[int, set[int]], rank: int,
                 where: str) -> tuple[list[Piece], bool]:
    """Rank `rank`'s pieces, and whether the log's training lines carry rank prefixes."""
    printing = sorted({p.rank for p in pieces if p.rank is not None and matching[id(p)]})
    if not printing:
        if rank != 0:
            raise LossLogError(f"{where}: its lines carry no rank prefix, so rank {rank}'s cannot be told apart "
                               "(--rank needs a prefixed log)")
        return pieces, False
    if rank not in printing:
        raise LossLogError(f"{where}: no training loss line of rank {rank} (ranks that printed one: "
                           f"{', '.join(map(str, printing))}); choose one with --rank")
    return [piece for piece in pieces if piece.rank == rank], True

