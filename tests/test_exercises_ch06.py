"""Chapter 6 checkers: what the mutant catalogue (tests/mutants/ch06.py, the home of "this answer -> this verdict
and hint") cannot say. Here: the book's reference solutions pass; what the messages of some catalogue answers contain
besides their hint (the section to re-read, the input, the entry, the cap or the package function named) and what no
message may contain (the solution's code, a whole mask, another mistake's hint); messages whose sequence or entry
comes from the drawn cases; the ids 6.3 uses vary; the checker's cases keep every mistake apart, under every drawn
seed."""
import pytest
import torch

import mutants
from attnbook.exercises import check
from mutants import ch06 as learners


def _entry(exercise_id, name):
    """The answer of the catalogue entry of `exercise_id` whose name starts with `name`, as a new kernel holds it."""
    return mutants.fresh(next(m.answer for m in mutants.load("6") if m.exercise_id == exercise_id
                              and m.name.startswith(name)))


@pytest.mark.parametrize("exercise_id, name", [("6.1", "causal_mask"), ("6.2", "decoder_self_mask"),
                                               ("6.3", "greedy_decode"), ("6.4", "to_allow_mask")])
def test_reference_passes(exercise_id, name, solutions):
    result = check(exercise_id, solutions(6)[name])
    assert result.passed, result.message


SECTIONS = {"6.1": '(Re-read "The causal mask".)', "6.2": '(Re-read "Padding and causal together".)',
            "6.3": '(Re-read "Greedy decoding".)', "6.4": '(Re-read "Three mask conventions".)'}
# Pieces of the solutions (and of whole masks) that no message may show
GIVE_AWAYS = ("torch.cat([ys", "(ys == eos_id)", "logits[:, -1]", "logits = model.decode", "expected [",
              "mask == 0", "mask > -1e4", "[1 0 0", "[1 1 0")


# (exercise, the start of a catalogue entry's name, what its message contains besides the entry's hint, what it must
# not contain besides the give-aways); every such message names the section to re-read
MESSAGES = [
    ("6.1", "right except that the last query may not see the first key", ("n=4", "entry [3, 0]"), ("[1 1 1 1]",)),
    *[("6.1", name, (f"your mask has shape ({k}, {k}) on n=",), ()) for name, k in (
        ("a module-level 32 x 32 tril", 32), ("a cached 64 x 64 tril", 64), ("a 128 x 128 tril made once", 128),
        ("nanoGPT's block_size 256", 256))],
    ("6.1", "(n - 1, n - 1)", (), ("fixed in your code",)),
    ("6.1", "a lambda around attnbook.masks.causal_mask", ("attnbook.masks.causal_mask", "the package's own solution"),
     ()),
    ("6.2", "padding applied to both queries and keys", ("padding queries are not blocked", "both axes"), ()),
    ("6.2", "upper triangle (triu)", ("use tril, not triu",), ()),
    ("6.2", "right, except that the first key", ("sequence 0 (length 3)",), ()),  # the length drawn by seed 0
    ("6.2", "right, except that the last key of a full sequence", ("for sequence 1 (length 5)", "entry [1, 0, 4, 4]"),
     ()),
    ("6.3", "a def wrapper that calls attnbook.models.greedy_decode",
     ("attnbook.models.transformer.greedy_decode", "the package's own solution"), ()),
    ("6.3", "hard-codes both bos 1 and eos 2", ("bos_id",), ()),
    ("6.3", "returns int32 ids", ("torch.int32", "torch.long"), ()),
    ("6.3", "samples from the softmax with a generator of its own", (), ("stop as soon",)),
    ("6.3", "argmax over the time axis", (), ("stop as soon",)),
    *[("6.3", name, (), ()) for name in ("finished rows keep generating", "stops as soon as the FIRST row",
                                         "decodes BOS alone every step", "never stops early",
                                         "drops the leading <bos>", "right, except that one token")],
    ("6.4", "calls attnbook.masks.convert_mask", ("attnbook.masks.convert_mask", "the package's own solution"), ()),
    ("6.4", "blocked where the entry equals the mask's minimum", ("blocks nothing", "float16"), ()),
    *[("6.4", name, (), ()) for name in ("additive: mask != 0", "~mask for every mask", "additive: torch.ones_like",
                                         "returns a float 0/1 tensor")],
]


@pytest.mark.parametrize("exercise_id, name, has, has_not", MESSAGES, ids=[f"{e} {n[:40]}" for e, n, *_ in MESSAGES])
def test_messages(exercise_id, name, has, has_not):
    result = check(exercise_id, _entry(exercise_id, name))
    assert not result.passed, result.message
    assert [piece for piece in has + (SECTIONS[exercise_id],) if piece not in result.message] == [], result.message
    assert [piece for piece in has_not + GIVE_AWAYS if piece in result.message] == [], result.message


def test_6_3_ids_vary():
    seen = []

    def recording(model, src, max_len, bos_id, eos_id):
        seen.append((bos_id, eos_id))
        return learners.greedy()(model, src, max_len, bos_id, eos_id)

    assert check("6.3", recording).passed
    assert len({b for b, _ in seen}) > 2 and len({e for _, e in seen}) > 2, seen
    assert any(b != 1 for b, _ in seen) and any(e != 2 for _, e in seen)


def _all_apart(outputs: list[list[torch.Tensor]]) -> None:
    """outputs[c][k]: result k (0: the right one, then each mistake) on case c; every two differ on some case."""
    def same(a, b):
        return a.shape == b.shape and torch.equal(a, b)

    count = len(outputs[0])
    for a in range(count):
        for b in range(a):
            assert any(not same(o[a], o[b]) for o in outputs), (a, b)


def test_6_3_cases_show_every_mistake():
    """The checker's model and cases are chosen so that each mistake changes the output somewhere and no two
    mistakes give the same outputs on every case; guard that choice against changes in the model or in torch."""
    from attnbook.exercises.ch06 import greedy

    outputs, ends = [], []  # per case: the right output, then each mistake's; the step of each row's EOS
    for _d, src, max_len, bos, eos, seed in greedy._decode_cases(relabel=False):
        model = greedy._model_for(bos, eos, seed)
        outputs.append([greedy._greedy(model, src, max_len, bos, eos, **kwargs)
                        for kwargs in [{}] + [kw for _h, kw in greedy._decode_mistake_specs(bos, eos).values()]])
        ends.append([int(e[0]) if len(e) else 99 for e in ((row[1:] == eos).nonzero() for row in outputs[-1][0])])
    _all_apart(outputs)
    first = outputs[0][0]
    assert 99 not in ends[0] and len(set(ends[0])) > 1  # every row of the first case ends, at different steps,
    assert first.size(1) < greedy.CASES[0][1] and 1 not in first[:, 1:].tolist()  # before max_len, and no BOS
    first_to_end = {e.index(min(e)) for e in ends if len(e) > 1 and sorted(e)[0] < sorted(e)[1]}
    assert 0 in first_to_end and len(first_to_end) > 1  # row 0 is not always the first (or last) to end


# ---------------------------------------------------------------------------------------------------------
# Inputs drawn from the run's seed (issue 23): every property a case was tuned for holds for every seed
# ---------------------------------------------------------------------------------------------------------

from seed_offsets import OFFSETS, catalogue_over_offsets  # noqa: E402  (`offset` is a fixture in conftest)


def test_6_1_drawn_sizes(offset):
    from attnbook.exercises.ch06 import causal

    seen = set()
    for o in OFFSETS:
        offset(o)
        sizes = causal.causal_sizes()
        assert [sizes[0], *sizes[2:5]] == [4, 2, 7, 1] and 5 <= sizes[1] <= 12 and 13 <= sizes[5] <= 24
        assert 256 < sizes[6] <= 300 and sizes[6] == max(sizes)  # last: past every cap of 256 or less
        seen.add((sizes[1], sizes[5], sizes[6]))
    assert len(seen) > 150  # of the 8 x 12 x 44 triples (the fixed sizes alone keep every mistake apart)
    assert len({s[2] for s in seen}) > 30  # the large size is new on most runs


def test_6_2_drawn_batches_keep_every_mistake_apart(offset):
    from attnbook.exercises.ch06 import decoder_mask

    for o in OFFSETS:
        offset(o)
        batches = decoder_mask.self_mask_batches()
        mixed, one, empty, none, single, int32 = (b[0] for b in batches)
        assert 5 in mixed and len(set(mixed)) == 3 and one[0] < 4 and 0 in empty and 4 in empty
        assert none == [3, 3] and single == [1] and len(set(int32)) == 3 and batches[-1][2] == torch.int32
        outputs = []
        for values, n, _dtype, _on in batches:
            ref, mistakes = decoder_mask.self_mask_and_mistakes(values, n)
            outputs.append([ref] + list(mistakes.values()))
        _all_apart(outputs)


def test_6_4_drawn_masks_keep_every_mistake_apart(offset):
    from attnbook.exercises.ch06 import convert

    for o in OFFSETS:
        offset(o)
        cases = convert._convert_cases()
        for kind in (True, False):  # boolean masks, then additive ones: a hint is named within its kind
            outputs = []
            for _desc, mask, ref in cases:
                if (mask.dtype == torch.bool) == kind:
                    outputs.append([ref] + list(convert._convert_mistakes(mask, ref).values()))
            _all_apart(outputs)
        assert any(m.dtype != torch.bool and (m == -10000).any() for _d, m, _r in cases)
        assert any(m.dtype != torch.bool and (m == -1e9).any() for _d, m, _r in cases)


def test_6_4_every_mask_but_the_empty_one_changes_with_the_seed(offset):
    from attnbook.exercises.ch06 import convert

    offset(OFFSETS[0])
    first = convert._convert_cases()
    offset(OFFSETS[1])
    second = convert._convert_cases()
    for (_d, a, _r), (_d2, b, _r2) in zip(first[:-1], second[:-1]):
        assert a.shape == b.shape and a.dtype == b.dtype
    assert sum(not torch.equal(a, b) for (_d, a, _r), (_d2, b, _r2) in zip(first, second)) >= len(first) - 2


def test_6_3_relabelled_cases_behave_like_the_cases_as_made(offset):
    """Every seed relabels the token ids of each case's model and source (new weights, new tokens): the right loop
    then gives exactly the same tokens relabelled, so each case keeps what it was chosen for
    (test_6_3_cases_show_every_mistake) under every seed; on a few seeds, every mistake is checked the same way. The
    reordered batch's memory mistake shows under every seed too."""
    from attnbook.exercises.ch06 import greedy

    def kwargs_of(bos, eos):  # every mistake's loop but "positions", whose tokens are positions, not ids
        return [kw for key, (_h, kw) in greedy._decode_mistake_specs(bos, eos).items() if key != "positions"]

    made = greedy._decode_cases(relabel=False)
    made_outputs = []
    for _d, src, max_len, bos, eos, seed in made[:greedy.REORDERED]:
        model = greedy._model_for(bos, eos, seed)
        made_outputs.append([greedy._greedy(model, src, max_len, bos, eos, **kw)
                             for kw in [{}] + kwargs_of(bos, eos)])
    for number, o in enumerate(OFFSETS[:50]):  # exact by construction; 50 seeds keep the test under a minute
        offset(o)
        cases = greedy._decode_cases()
        for (_d, src, max_len, bos, eos, seed), (_d0, src0, *_rest), outs in zip(cases, made, made_outputs):
            sigma = greedy.relabelling(bos, eos, seed)
            assert torch.equal(src, sigma[src0])
            model = greedy._model_for(bos, eos, seed)
            for kwargs, out in zip([{}] + (kwargs_of(bos, eos) if number < 3 else []), outs):
                assert torch.equal(greedy._greedy(model, src, max_len, bos, eos, **kwargs), sigma[out]), (o, kwargs)
        # argmax over the positions puts position 0 = PAD first, which the right loop never generates
        _d, src, max_len, bos, eos, seed = cases[0]
        positions = greedy._greedy(greedy._model_for(bos, eos, seed), src, max_len, bos, eos, position="positions")
        assert (positions[:, 1] == greedy.PAD).all()
        assert not (made_outputs[0][0][:, 1] == greedy.PAD).any()  # relabelling keeps PAD where it is
        _d, reordered, max_len, bos, eos, seed = cases[greedy.REORDERED]
        model = greedy._model_for(bos, eos, seed)
        right = greedy._greedy(model, reordered, max_len, bos, eos)
        stale = greedy._greedy(model, reordered, max_len, bos, eos, memory_of=cases[greedy.SAME_SHAPE][1])
        assert not (right.shape == stale.shape and torch.equal(right, stale)), o


@pytest.mark.parametrize("exercise_id", ["6.1", "6.2", "6.3", "6.4"])
def test_drawn_cases_give_every_catalogue_entry_its_verdict(exercise_id, monkeypatch):
    """The catalogue's verdicts hold under other seeds too (one or two here, and seeds 0 to 2 in test_remote; the
    properties above cover many more)."""
    catalogue_over_offsets(exercise_id, OFFSETS[:1 if exercise_id == "6.3" else 2], monkeypatch, generated=False)
