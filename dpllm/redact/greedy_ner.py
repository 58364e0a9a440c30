"""spaCy's greedy NER decoding, minus the cost of its C loop on this spaCy build.

spaCy's ``ner`` is a transition-based parser: a CNN embeds the tokens, a "lower" layer
precomputes each token's contribution to a hidden layer for each of three feature slots, and a
greedy loop takes one BILUO action per token (the next token, the first token of the open
entity, the previous token → maxout hidden layer → linear scores → best *valid* action). The
pinned spaCy wheel compiles the loop's state accessors (``StateC::B_``, ``eol`` …) with a
``PyGILState_Ensure``/``Release`` pair each, so the loop, which releases the GIL, takes and
drops it some 800 times per token: over half of NER's time on the redactor's windows, and
worse with other threads waiting for the GIL.

:class:`GreedyNer` runs the same model on the same numbers. While no entity is open, the
features are the token plus two padding slots, so those scores are computed for every token
at once; only tokens inside an entity need a step of their own. The arithmetic follows
``spacy.ml.parser_model.predict_states`` operation by operation (float32 sums in the same
order, the same maxout tie rule, the output layer through the model's own BLAS ``gemm``,
whose result per row does not depend on how many rows it is given), and action validity
follows ``spacy.pipeline._parser_internals.ner`` for documents without preset entities,
which is all the redactor builds. ``tests/redact/test_greedy_ner.py`` checks the entities
against ``nlp(doc).ents`` on the shipped corpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from dpllm.errors import RedactionError

__all__ = ["GreedyNer"]

_OUT, _BEGIN, _IN, _LAST, _UNIT = "O", "B", "I", "L", "U"


class GreedyNer:
    """Entities of a spaCy ``ner`` pipe (greedy, ``beam_width`` 1) on fresh docs.

    Args:
        ner: The loaded ``ner`` component of a spaCy pipeline.

    Raises:
        RedactionError: When the component is not the greedy transition-based NER with a
            three-feature maxout lower layer and a linear upper layer that this decodes.
    """

    def __init__(self, ner: Any) -> None:
        model = ner.model
        if ner.cfg.get("beam_width", 1) != 1 or not model.attrs.get("has_upper"):
            raise RedactionError("GreedyNer decodes greedy NER with an output layer only")
        self._tok2vec, self._lower, self._upper = model.layers
        if self._lower.get_dim("nF") != 3:
            raise RedactionError("GreedyNer expects NER's three state features")
        moves = ner.moves
        names = [moves.get_class_name(i) for i in range(moves.n_moves)]
        if len(names) != self._upper.get_dim("nO"):
            raise RedactionError("the NER output layer does not match its moves")
        self._labels: list[str] = []
        kinds: list[str] = []
        for name in names:
            kind, _, label = name.partition("-")
            kinds.append(kind if (kind == _OUT or label) else "")  # "U-" only blocks presets
            self._labels.append(label)
        kind_arr = numpy.asarray(kinds)
        self._kinds = kinds
        # Additive masks over the classes for a state with no open entity: `can_open` when a
        # multi-token entity may begin here (two or more tokens left, the next one does not
        # start a sentence), `plain` when the token is not whitespace (B and U need that).
        out = kind_arr == _OUT
        begin = kind_arr == _BEGIN
        unit = kind_arr == _UNIT
        self._closed_masks = {
            (can_open, plain): numpy.where(
                out | (plain & ((can_open & begin) | unit)), 0.0, -numpy.inf
            ).astype("f")
            for can_open in (False, True)
            for plain in (False, True)
        }
        # The I and L move of each label, for the steps inside an entity.
        index = {(k, lab): i for i, (k, lab) in enumerate(zip(kinds, self._labels, strict=True))}
        self._in_last = {
            lab: (index[(_IN, lab)], index[(_LAST, lab)])
            for k, lab in zip(kinds, self._labels, strict=True)
            if k == _BEGIN
        }
        self._unseen = sorted(int(c) for c in model.attrs.get("unseen_classes", ()))

    def __call__(
        self, doc: Any, blocked: Sequence[bool] | None = None
    ) -> list[tuple[str, int, int]]:
        """Entities of ``doc`` as ``(label, start_token, end_token)``, in order.

        Args:
            doc: A spaCy ``Doc`` without preset entities (e.g. from ``nlp.make_doc``).
            blocked: Per token, whether it may not be part of an entity (``None``: none is),
                as spaCy's NER on a doc with those tokens set "blocked" (``Doc.set_ents``).

        Returns:
            The spans ``ner(doc).ents`` would hold.
        """
        n = len(doc)
        if n == 0:
            return []
        if blocked is not None and len(blocked) != n:
            raise RedactionError("blocked needs one flag per token")
        tokvecs = self._tok2vec.predict([doc])
        # Row 0 holds the padding of each feature slot (a missing token), then one row per token.
        return self._decode(doc, blocked, self._lower.predict(tokvecs))

    def many(
        self, items: Sequence[tuple[Any, Sequence[bool] | None]]
    ) -> list[list[tuple[str, int, int]]]:
        """:meth:`__call__` on several ``(doc, blocked)`` pairs, with one model pass for all.

        The embedding CNN pads each document on its own (no window crosses two docs) and
        every later layer works row by row, so each doc's rows are the numbers a call of
        its own gives; :func:`dpllm.redact.nlp._checked_greedy_ner` checks this at load.
        One pass spares the per-call cost of the model's layers (most of NER's time on
        texts of a few hundred characters).
        """
        live = [(doc, blocked) for doc, blocked in items if len(doc)]
        for doc, blocked in live:
            if blocked is not None and len(blocked) != len(doc):
                raise RedactionError("blocked needs one flag per token")
        if not live:
            return [[] for _ in items]
        cached = self._lower.predict(self._tok2vec.predict([doc for doc, _ in live]))
        out: list[list[tuple[str, int, int]]] = []
        row = 1
        for doc, blocked in items:
            n = len(doc)
            if not n:
                out.append([])
                continue
            rows = numpy.concatenate([cached[:1], cached[row : row + n]])
            out.append(self._decode(doc, blocked, rows))
            row += n
        return out

    def _decode(
        self, doc: Any, blocked: Sequence[bool] | None, cached: Any
    ) -> list[tuple[str, int, int]]:
        """Greedy decoding of one doc from its lower-layer rows (row 0: the padding)."""
        from spacy.attrs import IS_SPACE, SENT_START

        n = len(doc)
        bias = self._lower.get_param("b")
        flags = doc.to_array([IS_SPACE, SENT_START])
        plain = flags[:, 0] == 0
        # B and I need a following token that does not start a sentence
        can_open = numpy.zeros(n, dtype=bool)
        can_open[:-1] = flags[1:, 1] != 1
        if blocked is not None:
            can_open[:-1] &= ~numpy.asarray(blocked[1:], dtype=bool)  # nor a blocked one

        # No open entity: features (token, padding, padding), for all tokens in one go.
        unmaxed = numpy.zeros((n, *bias.shape), dtype="f")
        unmaxed += cached[1:, 0]
        unmaxed += cached[0, 1]
        unmaxed += cached[0, 2]
        unmaxed += bias
        closed = self._scores(unmaxed)
        best = {
            key: numpy.argmax(closed + mask, axis=1) for key, mask in self._closed_masks.items()
        }
        ents: list[tuple[str, int, int]] = []
        labels, kinds = self._labels, self._kinds
        b = 0
        start = -1
        label = ""
        while b < n:
            if start < 0:
                if blocked is not None and blocked[b]:
                    b += 1  # O: never part of an entity
                    continue
                action = int(best[(bool(can_open[b]), bool(plain[b]))][b])
                kind = kinds[action]
                if kind == _BEGIN:
                    start, label = b, labels[action]
                elif kind == _UNIT:
                    ents.append((labels[action], b, b + 1))
            else:
                i_move, l_move = self._in_last[label]
                if can_open[b]:
                    unmaxed = numpy.zeros((1, *bias.shape), dtype="f")
                    unmaxed += cached[b + 1, 0]
                    unmaxed += cached[start + 1, 1]
                    unmaxed += cached[b, 2]  # the previous token (row b is token b - 1)
                    unmaxed += bias
                    row = self._scores(unmaxed)[0]
                    # first valid maximum wins, and I comes before L in the class order
                    extend = not row[l_move] > row[i_move]
                else:
                    extend = False  # only L is valid
                if not extend:
                    ents.append((label, start, b + 1))
                    start = -1
            b += 1
        return ents

    def _scores(self, unmaxed: Any) -> Any:
        """Maxout over pieces (spaCy's tie rule), then the output layer, per row."""
        if unmaxed.shape[-1] == 2:
            first, second = unmaxed[..., 0], unmaxed[..., 1]
            hidden = numpy.where(first > second, first, second)
        else:
            which = numpy.argmax(unmaxed, axis=-1)[..., None]
            hidden = numpy.take_along_axis(unmaxed, which, axis=-1)[..., 0]
        upper = self._upper
        scores = upper.ops.gemm(
            numpy.ascontiguousarray(hidden, dtype="f"), upper.get_param("W"), trans2=True
        )
        scores += upper.get_param("b")
        if self._unseen:
            scores[:, self._unseen] = scores.min(axis=1, keepdims=True)
        return scores
