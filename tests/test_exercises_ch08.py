"""Chapter 8 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint.

The wrong answers are written here from scratch, each with one deliberate mistake, independently of the checker's
own table of mistakes.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import mutants
from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 8.1 BERT's masking
# ---------------------------------------------------------------------------------------------------------


def test_8_1_reference_passes(solutions):
    result = check("8.1", solutions(8)["mlm_mask"])
    assert result.passed, result.message


def make_mlm_mask(*, p=0.15, split=(0.8, 0.9), where="chosen", labels="chosen", rng="generator", label_fill=-100,
                  random_high=None, outputs=2, in_place=False, order="rand-first"):
    """An mlm_mask with one deliberate mistake (the defaults give a correct one)."""

    def mlm_mask(ids, mask_id, vocab_size, generator):
        if rng == "generator":
            g = generator
        elif rng == "own":
            g = torch.Generator().manual_seed(0)
        else:
            g = None  # torch's global generator
        r_choose = torch.rand(ids.shape, generator=g)
        r_what = torch.rand(ids.shape, generator=g)
        random_ids = torch.randint(random_high or vocab_size, ids.shape, generator=g)
        chosen = r_choose < p if p <= 1 else r_choose > 0.15
        region = chosen if where == "chosen" else torch.ones_like(chosen)
        to_mask = region & (r_what < split[0])
        to_random = region & (r_what >= split[0]) & (r_what < split[1])
        if order == "overlap":  # two independent draws, the random id overriding [MASK]
            to_random = region & (torch.rand(ids.shape, generator=g) < 0.1)
        if in_place:
            masked = ids
            masked[to_mask] = mask_id
        else:
            masked = torch.where(to_mask, mask_id, ids)
        masked = torch.where(to_random, random_ids, masked)
        if labels == "chosen":
            out_labels = torch.where(chosen, ids, label_fill)
        elif labels == "everywhere":
            out_labels = ids.clone()
        elif labels == "masked-only":
            out_labels = torch.where(to_mask, ids, -100)
        elif labels == "after":
            out_labels = torch.where(chosen, masked, -100)
        else:  # float
            out_labels = torch.where(chosen, ids, -100).float()
        return (masked, out_labels, chosen) if outputs == 3 else (masked, out_labels)

    return mlm_mask


def test_8_1_a_correct_variant_passes():
    assert check("8.1", make_mlm_mask()).passed


def test_8_1_other_right_answers_pass():
    def with_bernoulli(ids, mask_id, vocab_size, generator):  # Hugging Face's order of draws
        labels = ids.clone()
        chosen = torch.bernoulli(torch.full(ids.shape, 0.15), generator=generator).bool()
        labels[~chosen] = -100
        replaced = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
        out = ids.clone()
        out[replaced] = mask_id
        rand = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~replaced
        out[rand] = torch.randint(vocab_size, ids.shape, generator=generator)[rand]
        return out, labels

    result = check("8.1", with_bernoulli)
    assert result.passed, result.message


def test_8_1_not_attempted():
    def mlm_mask(ids, mask_id, vocab_size, generator):
        raise NotImplementedError

    assert check("8.1", mlm_mask).status == "not attempted"


@pytest.mark.parametrize("kwargs, hint", [
    ({"split": (1.0, 1.0)}, "every chosen position became [MASK]"),
    ({"split": (0.8, 1.0)}, "no chosen position kept its id"),
    ({"split": (0.8, 0.8)}, "no chosen position got a random id"),
    ({"where": "everywhere"}, "only chosen positions may change"),
    ({"labels": "everywhere"}, "label only the chosen positions"),
    ({"label_fill": 0}, "must be labelled -100"),
    ({"labels": "masked-only"}, "label every chosen position, also those that got a random id"),
    ({"labels": "masked-only", "split": (0.8, 0.8)}, "labelled only the positions that became [MASK]"),
    ({"labels": "after"}, "ORIGINAL id"),
    ({"labels": "float"}, "dtype torch.float32"),
    ({"p": 2}, "your choice is inverted"),
    ({"p": 0.3}, "choose each position independently with probability 0.15"),
    ({"rng": "global"}, "pass generator=generator"),
    ({"rng": "own"}, "drew no random number from `generator`"),
    ({"random_high": 10}, "draw the random ids uniformly from all of [0, vocab_size)"),
    ({"outputs": 3}, "return only masked_ids and labels"),
    ({"in_place": True}, "in place"),
    ({"order": "overlap"}, "your cases overlap"),
], ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_8_1_wrong_answers_get_hints(kwargs, hint):
    result = check("8.1", make_mlm_mask(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


def test_8_1_messages_name_the_input_and_the_section():
    result = check("8.1", make_mlm_mask(split=(1.0, 1.0)))
    assert "ids of shape (200, 500)" in result.message and "Masked language modelling (BERT)" in result.message


def test_8_1_the_package_function_is_refused():
    def mlm_mask(ids, mask_id, vocab_size, generator):
        from attnbook.data import mlm_mask as package_mask

        return package_mask(ids, mask_id, vocab_size, generator)[:2]

    result = check("8.1", mlm_mask)
    assert not result.passed and "the package's own solution" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 8.2 causal-LM loss
# ---------------------------------------------------------------------------------------------------------


def test_8_2_reference_passes(solutions):
    result = check("8.2", solutions(8)["causal_lm_loss"])
    assert result.passed, result.message


def test_8_2_other_right_answers_pass():
    def transposed(logits, ids):
        return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:])

    def by_hand(logits, ids):
        logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
        return -logp.gather(-1, ids[:, 1:, None]).mean()

    for answer in (transposed, by_hand):
        result = check("8.2", answer)
        assert result.passed, result.message


def test_8_2_not_attempted():
    def causal_lm_loss(logits, ids):
        raise NotImplementedError

    assert check("8.2", causal_lm_loss).status == "not attempted"


def _flat(logits, ids):
    return logits.reshape(-1, logits.size(-1)), ids.reshape(-1)


@pytest.mark.parametrize("fn, hint", [
    (lambda logits, ids: F.cross_entropy(*_flat(logits, ids)), "no shift"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits[:, 1:], ids[:, :-1])), "the shift goes the wrong way"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), reduction="sum"), "you summed"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits.softmax(-1)[:, :-1], ids[:, 1:])), "applied a softmax"),
    (lambda logits, ids: F.cross_entropy(logits[:, :-1], ids[:, 1:]), "classes in dimension 1"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:])).item(), "without .item()"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), reduction="none"),
     "one loss per prediction"),
    (lambda logits, ids: F.nll_loss(*_flat(logits[:, :-1], ids[:, 1:])), "F.nll_loss expects log-probabilities"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits[:1, :-1], ids[:1, 1:])), "only the first sequence"),
    (lambda logits, ids: torch.tensor(F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:])).item()), "no gradient"),
    (lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:].float())), "class indices"),
], ids=["no-shift", "wrong-direction", "sum", "softmax", "class-dim", "item", "no-reduction", "nll", "first-only",
        "detached", "float-targets"])
def test_8_2_wrong_answers_get_hints(fn, hint):
    result = check("8.2", fn)
    assert not result.passed
    assert hint in result.message, result.message


def test_8_2_messages_name_the_input():
    result = check("8.2", lambda logits, ids: F.cross_entropy(*_flat(logits, ids)))
    assert "logits of shape (2, 5, 7)" in result.message and "Next-token prediction (GPT)" in result.message


def test_8_2_transformers_loss_is_refused():
    pytest.importorskip("transformers")

    def causal_lm_loss(logits, ids):
        from transformers.loss.loss_utils import ForCausalLMLoss

        return ForCausalLMLoss(logits, ids, logits.size(-1))

    result = check("8.2", causal_lm_loss)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 8.3 temperature and top-k sampling
# ---------------------------------------------------------------------------------------------------------


def test_8_3_reference_passes(solutions):
    result = check("8.3", solutions(8)["sample_next"])
    assert result.passed, result.message


def make_sample_next(*, temperature="divide", top_k="largest", rng="generator", shape="flat", greedy=True,
                     probs="softmax"):
    """A sample_next with one deliberate mistake (the defaults give a correct one)."""

    def sample_next(logits, temperature_, top_k_, generator):
        if greedy and temperature_ == 0:
            return logits.argmax(dim=-1)
        t = temperature_  # a division by 0 when greedy=False
        scaled = {"divide": logits / t, "multiply": logits * t, "ignore": logits}[temperature]
        if top_k_ is not None and top_k != "ignore":
            values, indices = torch.topk(scaled, top_k_, dim=-1, largest=top_k != "smallest")
            if top_k == "unmapped":
                choice = torch.multinomial(torch.softmax(values, -1), 1, generator=generator).squeeze(-1)
                return choice
            weights = torch.ones_like(values) if probs == "uniform" else values
            kept = torch.full_like(scaled, float("-inf")).scatter(-1, indices, weights)
            scaled = kept
        p = torch.softmax(scaled, dim=-1) if probs != "raw" else scaled
        g = {"generator": generator, "global": None, "own": torch.Generator().manual_seed(1)}[rng]
        out = torch.multinomial(p, 1, generator=g)
        return out if shape == "column" else out.squeeze(-1)

    return sample_next


def test_8_3_a_correct_variant_passes():
    assert check("8.3", make_sample_next()).passed


def test_8_3_not_attempted():
    def sample_next(logits, temperature, top_k, generator):
        raise NotImplementedError

    assert check("8.3", sample_next).status == "not attempted"


@pytest.mark.parametrize("kwargs, hint", [
    ({"temperature": "multiply"}, "you multiplied the logits by the temperature"),
    ({"temperature": "ignore"}, "the temperature changes nothing"),
    ({"top_k": "ignore"}, "outside the top_k"),
    ({"top_k": "smallest"}, "SMALLEST"),
    ({"top_k": "unmapped"}, "position within the top k"),
    ({"probs": "uniform"}, "uniformly"),
    ({"shape": "column"}, ".squeeze(-1)"),
    ({"rng": "global"}, "drew no random number from `generator`"),
    ({"rng": "own"}, "drew no random number from `generator`"),
    ({"greedy": False}, "with temperature 0 return the argmax"),
    ({"probs": "raw"}, "torch.multinomial takes probabilities"),
], ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_8_3_wrong_answers_get_hints(kwargs, hint):
    result = check("8.3", make_sample_next(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


def test_8_3_top_k_ignored_at_larger_k_is_named():
    def sample_next(logits, temperature, top_k, generator):  # right for top_k=1, ignores larger top_k
        if temperature == 0 or top_k == 1:
            return logits.argmax(dim=-1)
        return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator).squeeze(-1)

    result = check("8.3", sample_next)
    assert not result.passed and "outside the top_k" in result.message, result.message


def test_8_3_messages_name_the_input():
    result = check("8.3", make_sample_next(temperature="multiply"))
    assert "temperature=0.5" in result.message and "Temperature and top-k" in result.message, result.message


@pytest.mark.parametrize("path", ["attnbook.models.sample_next", "attnbook.models.gpt.sample_next"])
def test_8_3_the_package_sampler_is_refused(path):
    module, name = path.rsplit(".", 1)

    def sample_next(logits, temperature, top_k, generator):
        import importlib

        fn = getattr(importlib.import_module(module), name)
        return fn(logits, temperature, top_k, generator).squeeze(-1)

    result = check("8.3", sample_next)
    assert not result.passed and "the package's own solution" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# Fixes from the learner trial
# ---------------------------------------------------------------------------------------------------------

import functools  # noqa: E402

import attnbook.data  # noqa: E402

_PARTIAL_MLM = functools.partial(attnbook.data.mlm_mask)  # a global, as a notebook cell would keep it


def test_8_1_the_package_function_through_a_partial_in_globals_is_refused():
    def mlm_mask(ids, mask_id, vocab_size, generator):
        return _PARTIAL_MLM(ids, mask_id, vocab_size, generator)[:2]

    result = check("8.1", mlm_mask)
    assert not result.passed and "the package's own solution" in result.message, result.message


def test_8_1_transformers_collator_is_refused():
    pytest.importorskip("transformers")
    from transformers import DataCollatorForLanguageModeling

    class Tok:
        mask_token, pad_token, pad_token_id = "[MASK]", "[PAD]", 0

        def __init__(self, vocab_size, mask_id):
            self.vocab_size, self.mask_token_id = vocab_size, mask_id

        def __len__(self):
            return self.vocab_size

        def get_special_tokens_mask(self, v, already_has_special_tokens=True):
            return [0] * len(v)

        def convert_tokens_to_ids(self, t):
            return self.mask_token_id

    def mlm_mask(ids, mask_id, vocab_size, generator):
        collator = DataCollatorForLanguageModeling(Tok(vocab_size, mask_id), mlm_probability=0.15)
        collator.generator = generator
        return collator.torch_mask_tokens(ids.clone(), special_tokens_mask=torch.zeros_like(ids, dtype=torch.bool))

    result = check("8.1", mlm_mask)
    assert not result.passed and "the task asks you to write this without transformers" in result.message, \
        result.message


def make_random_ids(draw):
    """A right mlm_mask except for how the random ids are drawn: draw(ids, vocab_size, generator)."""

    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = torch.rand(ids.shape, generator=generator) < 0.15
        r = torch.rand(ids.shape, generator=generator)
        random_ids = draw(ids, vocab_size, generator)
        masked = torch.where(chosen & (r < 0.8), mask_id, ids)
        masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, masked)
        return masked, torch.where(chosen, ids, -100)

    return mlm_mask


def _pool(ids, vocab_size, generator):  # random ids drawn only among the tokens in the batch
    pool = ids.unique()
    return pool[torch.randint(pool.numel(), ids.shape, generator=generator)]


@pytest.mark.parametrize("draw, hint", [
    (lambda ids, V, g: torch.randint(1, V, ids.shape, generator=g), "the lower bound is 0"),
    (lambda ids, V, g: torch.randint(V - 1, ids.shape, generator=g), "upper bound, vocab_size, is exclusive"),
    (lambda ids, V, g: (ids + torch.randint(1, V, ids.shape, generator=g)) % V,
     "a random id may equal the original one"),
    (lambda ids, V, g: torch.randint(4, V, ids.shape, generator=g), "the lower bound is 0"),
    (_pool, "not from the tokens in the batch"),
], ids=["never-0", "never-V-1", "never-original", "skip-specials", "batch-pool"])
def test_8_1_random_ids_from_the_wrong_range_are_rejected(draw, hint):
    result = check("8.1", make_random_ids(draw))
    assert not result.passed
    assert hint in result.message, result.message


def test_8_1_random_ids_that_avoid_mask_id_are_rejected():
    def draw(ids, V, g):  # every id but the [MASK] id (3 in the big case, 2 in the small one)
        r = torch.randint(V - 1, ids.shape, generator=g)
        return r + (r >= (2 if V == 5 else 3)).long()

    result = check("8.1", make_random_ids(draw))
    assert not result.passed and "may be mask_id too" in result.message, result.message


def test_8_1_right_random_ids_pass_the_small_vocabulary():
    result = check("8.1", make_random_ids(lambda ids, V, g: torch.randint(V, ids.shape, generator=g)))
    assert result.passed and "vocabulary" in result.message, result.message


def test_8_1_swapped_outputs_are_named():
    right = make_mlm_mask()

    def mlm_mask(ids, mask_id, vocab_size, generator):
        masked, labels = right(ids, mask_id, vocab_size, generator)
        return labels, masked

    result = check("8.1", mlm_mask)
    assert not result.passed and "return (masked_ids, labels) in this order" in result.message, result.message


def make_correlated(choose):
    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = choose(ids, generator)
        r = torch.rand(ids.shape, generator=generator)
        masked = torch.where(chosen & (r < 0.8), mask_id, ids)
        random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
        masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, masked)
        return masked, torch.where(chosen, ids, -100)

    return mlm_mask


@pytest.mark.parametrize("choose", [
    lambda ids, g: (torch.rand(ids.shape[1], generator=g) < 0.15).expand(ids.shape),  # same columns every row
    lambda ids, g: (torch.rand(ids.shape[0], 1, generator=g) < 0.15).expand(ids.shape),  # one choice per row
], ids=["same-columns", "per-row"])
def test_8_1_correlated_choices_are_named(choose):
    result = check("8.1", make_correlated(choose))
    assert not result.passed
    assert "choose each position independently" in result.message, result.message
    assert "labelled only" not in result.message, result.message


def _ce(logits, ids, **kwargs):
    return F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), **kwargs)


@pytest.mark.parametrize("fn, hint", [
    (lambda logits, ids: _ce(logits, ids, reduction="none").view(ids.size(0), -1).sum(1).mean(),
     "you summed over the positions"),
    (lambda logits, ids: _ce(logits, ids, ignore_index=0), "ignore_index=0"),
    (lambda logits, ids: F.nll_loss(*_flat(torch.log_softmax(logits, dim=1)[:, :-1], ids[:, 1:])), "dim=-1"),
], ids=["sum-then-mean", "ignore-0", "log-softmax-dim1"])
def test_8_2_more_wrong_answers_get_hints(fn, hint):
    result = check("8.2", fn)
    assert not result.passed
    assert hint in result.message, result.message


def test_8_3_softmax_over_the_batch_is_named():
    def sample_next(logits, temperature, top_k, generator):
        if temperature == 0:
            return logits.argmax(dim=-1)
        scaled = logits / temperature
        if top_k is not None:
            kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return torch.multinomial(torch.softmax(scaled, dim=0), 1, generator=generator).squeeze(-1)

    result = check("8.3", sample_next)
    assert not result.passed and "dim=-1" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# What the fixes of the learner's report require
# ---------------------------------------------------------------------------------------------------------

_RECIPES = ("r < 0.8", "0.8 <= r", "< 0.15", "torch.randint(vocab_size, ids.shape", "logits[:, :-1]", "ids[:, 1:]",
            "torch.multinomial(probs, 1", "logits.argmax(dim=-1)", "torch.cat(")


def _no_recipe(message):
    return not any(r in message for r in _RECIPES)


def _masked(ids, mask_id, vocab_size, generator, chosen):
    r = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    return torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, masked)


def test_8_1_a_fixed_number_of_chosen_positions_is_not_independent():
    def fixed_count(ids, mask_id, vocab_size, generator):
        n = ids.numel()
        chosen = torch.zeros(n, dtype=torch.bool)
        chosen[torch.randperm(n, generator=generator)[:round(0.15 * n)]] = True
        chosen = chosen.reshape(ids.shape)
        return _masked(ids, mask_id, vocab_size, generator, chosen), torch.where(chosen, ids, -100)

    def fixed_per_row(ids, mask_id, vocab_size, generator):
        scores = torch.rand(ids.shape, generator=generator)
        k = round(0.15 * ids.size(1))
        chosen = scores <= scores.kthvalue(k, dim=1, keepdim=True).values
        return _masked(ids, mask_id, vocab_size, generator, chosen), torch.where(chosen, ids, -100)

    for answer in (fixed_count, fixed_per_row):
        result = check("8.1", answer)
        assert not result.passed and "independently" in result.message and _no_recipe(result.message), \
            result.message


@pytest.mark.parametrize("fix, piece", [
    (lambda masked, labels, ids: [masked, labels], "tuple"),
    (lambda masked, labels, ids: (masked, labels.int()), "torch.int64"),
    (lambda masked, labels, ids: (masked, torch.where(labels == -100, ids, -100)), "inverted"),
    (lambda masked, labels, ids: (torch.where(masked == ids, masked, torch.where(labels != -100, ids, masked)),
                                  labels), None),
], ids=["list", "int32-labels", "inverted-labels", "undo-changes"])
def test_8_1_return_types_and_inverted_labels(fix, piece):
    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = torch.rand(ids.shape, generator=generator) < 0.15
        masked = _masked(ids, mask_id, vocab_size, generator, chosen)
        return fix(masked, torch.where(chosen, ids, -100), ids)

    result = check("8.1", mlm_mask)
    assert not result.passed, piece
    if piece:
        assert piece in result.message, result.message


def test_8_1_the_global_generator_reseeded_from_the_given_one_is_refused():
    def mlm_mask(ids, mask_id, vocab_size, generator):
        torch.manual_seed(generator.initial_seed())
        chosen = torch.rand(ids.shape) < 0.15
        return _masked(ids, mask_id, vocab_size, None, chosen), torch.where(chosen, ids, -100)

    result = check("8.1", mlm_mask)
    assert not result.passed and "drew no random number from `generator`" in result.message, result.message


def test_8_1_a_hard_coded_mask_id_is_named():
    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = torch.rand(ids.shape, generator=generator) < 0.15
        return _masked(ids, 3, vocab_size, generator, chosen), torch.where(chosen, ids, -100)

    result = check("8.1", mlm_mask)
    assert not result.passed and "ignores the mask_id argument" in result.message, result.message


def test_8_1_messages_give_no_recipe():
    overlap = next(m.answer for m in mutants.load("8") if m.exercise_id == "8.1"
                   and m.name.startswith("two independent draws, the random ids written over [MASK]"))  # the catalogue's

    result = check("8.1", overlap)
    assert not result.passed and "overlap" in result.message and _no_recipe(result.message), result.message


@pytest.mark.parametrize("fn, piece", [
    (lambda lg, ids: -(lg[:, :-1].exp() / lg[:, :-1].exp().sum(-1, keepdim=True)).gather(-1, ids[:, 1:, None]).log()
     .mean(), "overflow"),
    (lambda lg, ids: F.nll_loss(torch.log(torch.softmax(lg[:, :-1], -1)).reshape(-1, lg.size(-1)),
                                ids[:, 1:].reshape(-1)), "log_softmax"),
    (lambda lg, ids: _ce(lg, ids).reshape(1), "0-dimensional"),
    (lambda lg, ids: _ce(lg, ids, reduction="sum") / ids.numel(), "batch * (seq - 1)"),
    (lambda lg, ids: F.cross_entropy(lg[:, -2], ids[:, -1]), "only the last prediction"),
    (lambda lg, ids: F.cross_entropy(lg[:, :-1].transpose(0, 1).reshape(-1, lg.size(-1)), ids[:, 1:].reshape(-1)),
     "flattened in different orders"),
    (lambda lg, ids: _ce(lg, ids, label_smoothing=0.1), "label_smoothing"),
    (lambda lg, ids: F.cross_entropy(lg.reshape(-1, lg.size(-1)), ids.reshape(-1)), "no shift"),
], ids=["naive-exp", "log-of-softmax", "shape-1", "divided-by-B-T", "last-only", "time-major", "smoothing",
        "no-shift"])
def test_8_2_more_mistakes_are_named_without_the_solution_line(fn, piece):
    result = check("8.2", fn)
    assert not result.passed and piece in result.message and _no_recipe(result.message), result.message


def test_8_2_the_first_check_does_not_import_transformers():
    import subprocess
    import sys

    code = ("import sys, torch.nn.functional as F\nfrom attnbook.exercises import check\n"
            "r = check('8.2', lambda lg, ids: F.cross_entropy(lg[:, :-1].transpose(1, 2), ids[:, 1:]))\n"
            "assert r.passed, r.message\nprint('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


def _sampler(cut):
    """A sample_next that is right except for `cut(scaled, top_k)`, which returns the logits to sample from."""

    def sample_next(logits, temperature, top_k, generator):
        if temperature == 0:
            return logits.argmax(dim=-1)
        scaled = logits / temperature
        if top_k is not None:
            scaled = cut(scaled, top_k)
        return torch.multinomial(torch.softmax(scaled, -1), 1, generator=generator).squeeze(-1)

    return sample_next


def _keep(scaled, k, fill):
    kth = torch.topk(scaled, k, dim=-1).values[:, -1:]
    return torch.where(scaled >= kth, scaled, fill(scaled))


@pytest.mark.parametrize("answer, piece", [
    (_sampler(lambda s, k: _keep(s, min(k + 1, s.size(-1)), lambda s: torch.full_like(s, float("-inf")))),
     "top_k + 1"),
    (_sampler(lambda s, k: _keep(s, k, torch.zeros_like)), "-inf"),
    (_sampler(lambda s, k: _keep(s, k, lambda s: s.amin(-1, keepdim=True).expand_as(s))), "-inf"),
], ids=["k-plus-1", "fill-0", "fill-row-min"])
def test_8_3_top_k_mistakes_are_named(answer, piece):
    result = check("8.3", answer)
    assert not result.passed and piece in result.message and _no_recipe(result.message), result.message


def test_8_3_randomness_rules():
    def tiny_temperature(logits, temperature, top_k, generator):
        probs = torch.softmax(logits.double() / max(temperature, 1e-6), -1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    def global_reseed(logits, temperature, top_k, generator):
        if temperature == 0:
            return logits.argmax(dim=-1)
        torch.manual_seed(generator.initial_seed())
        return torch.multinomial(torch.softmax(logits / temperature, -1), 1).squeeze(-1)

    def no_none(logits, temperature, top_k, generator):
        if temperature == 0:
            return logits.argmax(dim=-1)
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        scaled = logits.masked_fill(logits < kth, float("-inf")) / temperature
        return torch.multinomial(torch.softmax(scaled, -1), 1, generator=generator).squeeze(-1)

    for answer, piece in ((tiny_temperature, "at temperature 0"), (global_reseed, "drew no random number"),
                          (no_none, "top_k=None means no cut")):
        result = check("8.3", answer)
        assert not result.passed and piece in result.message and _no_recipe(result.message), result.message


# ---------------------------------------------------------------------------------------------------------
# Issue 23: the statistics of 8.1 and 8.3, computed from the windows the checks test
# ---------------------------------------------------------------------------------------------------------

FALSE_FAIL_LIMIT = 1e-6  # a right answer may fail one check (both of its passes together) at most this often
POWER_LIMIT = 1 - 1e-6  # each wrong class of the catalogue must fail at least this often


def _windows_of_a_right_answer(monkeypatch, exercise_id, answer):
    """The (count, n, p) of every window the check tests while a right answer passes it (both passes)."""
    from attnbook.exercises.ch08 import _shared, masking, sampling

    seen = []

    def recording(count, n, p):
        seen.append((count, n, p))
        return _shared.within_window(count, n, p)

    monkeypatch.setattr(masking, "within_window", recording)
    monkeypatch.setattr(sampling, "within_window", recording)
    result = check(exercise_id, answer)
    assert result.passed, result.message
    return seen


def _outside(n, p):
    """The exact probability that a binomial(n, p) count falls outside the check's window for (n, p)."""
    from scipy.stats import binom

    from attnbook.exercises.ch08._shared import window

    low, high = window(n, p)
    return float(binom.cdf(math.ceil(low) - 1, n, p) + binom.sf(math.floor(high), n, p))


def _inside(n, p_true, p_window):
    """The probability that a binomial(n, p_true) count falls inside the check's window for (n, p_window)."""
    from scipy.stats import binom

    from attnbook.exercises.ch08._shared import window

    low, high = window(n, p_window)
    return float(binom.cdf(math.floor(high), n, p_true) - binom.cdf(math.ceil(low) - 1, n, p_true))


def test_8_1_false_failure_rate(monkeypatch, solutions):
    pytest.importorskip("scipy")
    from attnbook.exercises.ch08._shared import FALSE_FAILURE

    windows = _windows_of_a_right_answer(monkeypatch, "8.1", solutions(8)["mlm_mask"])
    assert 80 <= len(windows) <= 2 * 48, len(windows)  # 48 windows per pass at most (the module's docstring)
    exact = sum(_outside(n, p) for _count, n, p in windows)
    # besides the windows: every position chosen in the (2, 8) case (0.15^16 per pass), and exactly round(15%) of
    # the positions in four calls (the product of four binomial modes, below 7e-10 per pass)
    from scipy.stats import binom

    exact_15 = math.prod(binom.pmf(round(0.15 * n), n, 0.15) for n in (64 * 30, 100_000, 100_000, 300_000))
    total = exact + 2 * (0.15 ** 16 + exact_15)
    assert total <= FALSE_FAIL_LIMIT and len(windows) * FALSE_FAILURE <= FALSE_FAIL_LIMIT, (total, len(windows))


def test_8_1_power_against_each_wrong_class():
    pytest.importorskip("scipy")
    from attnbook.exercises.ch08._shared import window
    from attnbook.exercises.ch08.masking import POSITIONS_SHAPE

    rows, _positions = POSITIONS_SHAPE
    # A position or an id that is never chosen counts 0, below every window of the positions case: power 1.
    assert window(rows, 0.15)[0] > 0 and window(1_500, 0.15)[0] > 0  # each id fills about 2,000 positions
    # A rate off by 0.01 (0.14 or 0.16; further off is caught more often): it must pass the rate windows of the
    # (200, 500) and (600, 500) calls, in both passes.
    for p in (0.14, 0.16):
        passes = (_inside(100_000, p, 0.15) * _inside(300_000, p, 0.15)) ** 2
        assert 1 - passes >= POWER_LIMIT, (p, passes)
    # A split off by 0.03 in the share of [MASK] (0.77 or 0.83; the random and unchanged shares take the rest): the
    # [MASK] windows of the (200, 500) call (about 15,000 chosen, vocabulary 1,000) and of the (600, 500) call
    # (about 45,000 chosen, vocabulary 5, where 1/5 of the random ids is [MASK] too).
    for share in (0.77, 0.83):
        random_ = (1 - share) / 2
        passes = (_inside(15_000, share + random_ / 1000, 0.8 + 0.1 / 1000)
                  * _inside(45_000, share + random_ / 5, 0.8 + 0.1 / 5)) ** 2
        assert 1 - passes >= POWER_LIMIT, (share, passes)
    # ... and in the share left unchanged (0.07 or 0.13, [MASK] keeping 0.8)
    for keep in (0.07, 0.13):
        random_ = 0.2 - keep
        passes = (_inside(15_000, keep + random_ / 1000, 0.1 + 0.1 / 1000)
                  * _inside(45_000, keep + random_ / 5, 0.1 + 0.1 / 5)) ** 2
        assert 1 - passes >= POWER_LIMIT, (keep, passes)


def test_8_3_false_failure_rate(monkeypatch, solutions):
    pytest.importorskip("scipy")
    from attnbook.exercises.ch08._shared import FALSE_FAILURE
    from attnbook.exercises.ch08.sampling import CONFIGS

    from attnbook.exercises.ch08.sampling import TIE_SHAPE

    windows = _windows_of_a_right_answer(monkeypatch, "8.3", solutions(8)["sample_next"])
    # every count of 2 rows x 6 tokens, and the share of the second of two equal largest logits, in both passes
    assert len(windows) == 2 * (len(CONFIGS) * 12 + 1), len(windows)
    ties = [(n, p) for _count, n, p in windows if (n, p) == (TIE_SHAPE[0], 0.5)]
    assert len(ties) == 2, windows
    tie_rate = sum(_outside(n, p) for n, p in ties)  # binomial(200, 1/2) outside [48, 152]: 2.7e-14 per pass
    assert tie_rate < 1e-13, tie_rate
    # The rest cannot fail a right answer (test_8_3_tuned_cases_hold_for_every_offset): at the tiny temperature the
    # tokens other than the pair, and in the case far below 0 those outside the top k, have probability exactly 0.
    total = sum(_outside(n, p) for _count, n, p in windows)
    assert total <= FALSE_FAIL_LIMIT and len(windows) * FALSE_FAILURE <= FALSE_FAIL_LIMIT, total


def test_8_3_power_against_each_wrong_class():
    # Every mistake whose frequencies the check tests (the others fail deterministically: argmax, a shape, an
    # error such as exp overflowing): it passes a setting only if every count fits its window, so at most with
    # the probability that its least fitting count does; it must pass every setting in both passes.
    pytest.importorskip("scipy")
    from attnbook.exercises.ch08.sampling import _N, CONFIGS, ROWS, _probs, _sample_mistakes

    passes: dict[str, float] = {}
    for which, temperature, top_k in CONFIGS:
        rows = ROWS[which].float().double()
        right = _probs(rows, temperature, top_k)
        for hint, probs in _sample_mistakes(rows, temperature, top_k):
            fit = min(_inside(_N, float(q), float(p)) for q, p in zip(probs.flatten(), right.flatten()))
            passes[hint] = passes.get(hint, 1.0) * fit
    for hint, p in passes.items():
        assert 1 - p ** 2 >= POWER_LIMIT, (hint, p)
    # An answer greedy at a tiny temperature > 0 draws the first of the two equal largest logits in every row (a
    # count of 0 for the second), one that always takes the second a count of 200: both outside the window, so
    # rejected with certainty.
    from attnbook.exercises.ch08._shared import window
    from attnbook.exercises.ch08.sampling import TIE_SHAPE

    low, high = window(TIE_SHAPE[0], 0.5)
    assert 0 < low and high < TIE_SHAPE[0], (low, high)
    # a finite fill at the settings whose kept logits are far below it
    for fill, before in ((-10.0, False), (-10.0, True), (-20.0, False), (0.0, False)):
        p = 1.0
        for which, temperature, top_k in CONFIGS:
            if top_k is None:
                continue
            rows = ROWS[which].float().double()
            probs = _probs(rows, temperature, top_k, fill=fill, fill_before=before)
            right = _probs(rows, temperature, top_k)
            p *= min(_inside(_N, float(q), float(r)) for q, r in zip(probs.flatten(), right.flatten()))
        assert 1 - p ** 2 >= POWER_LIMIT, (fill, before, p)


# ---------------------------------------------------------------------------------------------------------
# Issue 23: fresh values on every pass. Every catalogue entry keeps its verdict for many values of the run's offset
# (each check also runs its second pass, at offset + compare.FRESH_STEP); the tuned properties of the drawn cases are
# checked directly for 200 offsets where a case is tuned (chapters 9 and 10).
# ---------------------------------------------------------------------------------------------------------

from seed_offsets import catalogue_over_offsets, offsets  # noqa: E402


@pytest.mark.parametrize("exercise_id, count", [("8.1", 3), ("8.2", 20), ("8.3", 2)])
def test_catalogue_verdicts_hold_for_many_offsets(exercise_id, count, monkeypatch):
    catalogue_over_offsets(exercise_id, offsets(count), monkeypatch)


@pytest.mark.parametrize("offset", offsets(200))
def test_8_2_every_mistake_separates_on_every_draw(offset, monkeypatch):
    # On every draw each known mistake gives a loss far (1e-4, ten times the tolerance) from the right one, and
    # the large case keeps its targets alternating between the largest and the smallest logit.
    from attnbook.exercises import compare
    from attnbook.exercises.ch08.lm_loss import _lm_mistakes

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    g = compare.generator(825)
    logits = 100.0 * torch.randn(2, 4, 9, generator=g)
    assert logits.abs().max() > 100  # beyond float32's exp range
    for seed, (B, T, V) in zip(range(820, 825), [(2, 5, 7), (3, 9, 11), (1, 6, 13), (4, 2, 5), (2, 12, 50)]):
        g = compare.generator(seed)
        lg = 2.0 * torch.randn(B, T, V, generator=g, dtype=torch.float64)
        ids = torch.randint(V, (B, T), generator=g)
        ids[-1, -1] = 0
        right = F.cross_entropy(lg[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        for hint, value in _lm_mistakes(lg, ids).items():
            assert not abs(float(value) - float(right)) <= 1e-4, (seed, hint)  # NaN (no target left) differs too


def test_8_3_transformers_warpers_are_refused_by_their_public_name():
    pytest.importorskip("transformers")

    def sample_next(logits, temperature, top_k, generator):
        from transformers import TopKLogitsWarper

        if temperature == 0:
            return logits.argmax(dim=-1)
        scaled = logits / temperature
        if top_k is not None:
            scaled = TopKLogitsWarper(top_k)(None, scaled)
        return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)

    result = check("8.3", sample_next)
    assert not result.passed and "without transformers.TopKLogitsWarper" in result.message, result.message


def test_8_2_the_transformers_loss_is_named_not_its_module():
    pytest.importorskip("transformers")

    def causal_lm_loss(logits, ids):
        from transformers.loss.loss_utils import ForCausalLMLoss

        return ForCausalLMLoss(logits, ids, logits.size(-1))

    message = check("8.2", causal_lm_loss).message
    assert "without transformers.loss.loss_utils.ForCausalLMLoss" in message and "<module>" not in message, message


# ---------------------------------------------------------------------------------------------------------
# Learner trial B: wrong answers that passed 8.3, and hints that named another mistake
# ---------------------------------------------------------------------------------------------------------

def _mlm_two_draws(order):
    """mlm_mask with two independent draws for [MASK] (0.8) and a random id (0.1) over the chosen positions; `order`:
    which is written last, or "disjoint" (the random id only where [MASK] was not drawn, still with 0.1)."""

    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = torch.rand(ids.shape, generator=generator) < 0.15
        to_mask = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
        to_random = chosen & (torch.rand(ids.shape, generator=generator) < 0.1)
        random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
        if order == "disjoint":
            to_random &= ~to_mask
        if order == "mask-last":
            masked = torch.where(to_mask, mask_id, torch.where(to_random, random_ids, ids))
        else:
            masked = torch.where(to_random, random_ids, torch.where(to_mask, mask_id, ids))
        return masked, torch.where(chosen, ids, -100)

    return mlm_mask


@pytest.mark.parametrize("order, piece, not_piece", [
    ("random-last", "your cases overlap", "0.1 / 0.2"),  # about 72/10/18
    ("mask-last", "0.1 / 0.2 = 0.5", "your cases overlap"),  # about 80/2/18
    ("disjoint", "0.1 / 0.2 = 0.5", "your cases overlap"),  # about 80/2/18
])
def test_8_1_the_overlap_hint_only_for_the_overlap(order, piece, not_piece):
    result = check("8.1", _mlm_two_draws(order))
    assert not result.passed and piece in result.message and not_piece not in result.message, result.message
    assert _no_recipe(result.message), result.message


def _mlm_keeping_draws():
    """A right mlm_mask except that it keeps the uniform numbers of its first call of each shape."""
    kept = {}

    def mlm_mask(ids, mask_id, vocab_size, generator):
        if ids.shape not in kept:
            kept[ids.shape] = torch.rand(ids.shape, generator=generator)
        u = kept[ids.shape]
        random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
        masked = torch.where(u < 0.12, mask_id, ids)
        masked = torch.where((u >= 0.12) & (u < 0.135), random_ids, masked)
        return masked, torch.where(u < 0.15, ids, -100)

    return mlm_mask


def test_8_1_kept_draws_are_not_blamed_on_the_global_generator():
    answer = _mlm_keeping_draws()
    result = check("8.1", answer)  # the uniform numbers of its first call: the first and third call differ
    assert not result.passed and "even the first and the third" in result.message, result.message
    assert "from one call to the next" in result.message and "global random generator was" not in result.message
    result = check("8.1", answer)  # all of them kept now: the same positions for every seed
    assert not result.passed and "chose exactly the same positions" in result.message, result.message
    assert "from one call to the next" in result.message, result.message


def test_8_1_the_global_generator_is_still_named_when_it_explains_the_difference():
    def mlm_mask(ids, mask_id, vocab_size, generator):  # the random ids from the global generator
        chosen = torch.rand(ids.shape, generator=generator) < 0.15
        r = torch.rand(ids.shape, generator=generator)
        masked = torch.where(chosen & (r < 0.8), mask_id, ids)
        masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), torch.randint(vocab_size, ids.shape), masked)
        return masked, torch.where(chosen, ids, -100)

    result = check("8.1", mlm_mask)
    assert not result.passed and "when the global random generator was in another state" in result.message, \
        result.message


def test_8_2_view_after_a_slice_names_the_slice():
    def causal_lm_loss(logits, ids):
        V = logits.shape[-1]
        return F.cross_entropy(logits[:, :-1].view(-1, V), ids[:, 1:].view(-1))

    result = check("8.2", causal_lm_loss)
    assert not result.passed and "after a slice" in result.message and ".reshape()" in result.message, \
        result.message


@pytest.mark.parametrize("fill", [-1e4, -100.0])
def test_8_3_a_finite_fill_fails_far_below_0(fill):
    result = check("8.3", _sampler(lambda s, k: _keep(s, k, lambda s: torch.full_like(s, fill))))
    assert not result.passed and "far below 0" in result.message and "float('-inf')" in result.message, \
        result.message


def test_8_3_a_large_finite_fill_below_every_logit_passes():
    result = check("8.3", _sampler(lambda s, k: _keep(s, k, lambda s: torch.full_like(s, -1e9))))
    assert result.passed, result.message


@pytest.mark.parametrize("threshold", [1e-3, 1e-2])
def test_8_3_greedy_at_a_tiny_temperature_fails(threshold):
    right = _sampler(lambda s, k: _keep(s, k, lambda s: torch.full_like(s, float("-inf"))))

    def sample_next(logits, temperature, top_k, generator):
        if temperature < threshold:
            return logits.argmax(dim=-1)
        return right(logits, temperature, top_k, generator)

    result = check("8.3", sample_next)
    assert not result.passed and "even at a tiny temperature" in result.message, result.message


def test_8_3_a_threshold_over_the_whole_batch_is_named():
    def over_batch(scaled, k):
        kth = torch.topk(scaled.flatten(), k).values[-1]
        return scaled.masked_fill(scaled < kth, float("-inf"))

    result = check("8.3", _sampler(over_batch))
    assert not result.passed and "each row keeps its own top_k largest logits" in result.message, result.message
    assert "over the vocabulary (dim=-1)" not in result.message, result.message


@pytest.mark.parametrize("cast, piece", [
    (lambda logits, t: (logits.half().float(), t), "the logits rounded to float16"),
    (lambda logits, t: (logits.bfloat16().float(), t), "the logits rounded to bfloat16"),
    (lambda logits, t: ((logits / t).half().float(), 1.0), "logits / temperature rounded to float16"),
    (lambda logits, t: ((logits / t).bfloat16().float(), 1.0), "logits / temperature rounded to bfloat16"),
], ids=["float16", "bfloat16", "float16-scaled", "bfloat16-scaled"])
def test_8_3_precision_lost_is_named(cast, piece):
    right = _sampler(lambda s, k: _keep(s, k, lambda s: torch.full_like(s, float("-inf"))))

    def sample_next(logits, temperature, top_k, generator):
        if temperature == 0:
            return logits.argmax(dim=-1)
        return right(*cast(logits, temperature), top_k, generator)

    result = check("8.3", sample_next)
    assert not result.passed and piece in result.message, result.message


def test_8_3_tuned_cases_hold_for_every_offset():
    # For 200 offsets and their second passes: (tie) in every row two equal largest logits and the others so far
    # below that, at the tiny temperature, a right softmax gives exactly 1/2, 1/2 and 0 in float32 and float64;
    # (deep) the logits of a row at least DEEP_GAP apart, in the same order after dividing by the temperature (the
    # top k is the same for any method), logits / temperature below -20,000, so that a fill of -1e4 or -100 leaves
    # the top k exactly 0 probability, and -inf (or -1e9) every sample inside the top k.
    from attnbook.exercises import compare
    from attnbook.exercises.ch08.sampling import (DEEP_GAP, DEEP_SHAPE, DEEP_TEMPERATURE, DEEP_TOP_K, TIE_MARGIN,
                                                  TIE_SHAPE, TIE_TEMPERATURE, deep_case, tie_case)

    for base in offsets(200):
        for offset in (base, base + compare.FRESH_STEP):
            with compare.seed_offset(offset):
                logits, pairs = tie_case()
                deep = deep_case()
            assert logits.shape == TIE_SHAPE and logits.dtype == torch.float32
            top = logits.gather(-1, pairs)
            assert bool((pairs[:, 0] < pairs[:, 1]).all()) and torch.equal(top[:, 0], top[:, 1])
            others = logits.scatter(-1, pairs, float("-inf"))
            assert bool((others.amax(-1) <= top[:, 0] - 0.99 * TIE_MARGIN).all())
            for dtype in (torch.float32, torch.float64):
                probs = torch.softmax(logits.to(dtype) / TIE_TEMPERATURE, dim=-1)
                assert bool((probs.gather(-1, pairs) == 0.5).all()) and float(probs.scatter(-1, pairs, 0.0).sum()) == 0
            assert deep.shape == DEEP_SHAPE and deep.dtype == torch.float32
            ordered = deep.sort(dim=-1, descending=True).values
            assert float((ordered[:, :-1] - ordered[:, 1:]).min()) >= 0.99 * DEEP_GAP
            scaled = deep / DEEP_TEMPERATURE  # float32, as an answer gets it
            assert torch.equal(scaled.argsort(-1), deep.argsort(-1)) and float(scaled.max()) < -2e4
            s_ordered = scaled.sort(dim=-1, descending=True).values
            assert bool((s_ordered[:, :-1] > s_ordered[:, 1:]).all())  # no ties after the division either
            kept = torch.zeros_like(deep, dtype=torch.bool).scatter(-1, deep.topk(DEEP_TOP_K, -1).indices, True)
            for fill in (-1e4, -100.0):
                probs = torch.softmax(torch.where(kept, scaled, torch.full_like(scaled, fill)), dim=-1)
                assert float(probs[kept].sum()) == 0
            for fill in (float("-inf"), -1e9):
                probs = torch.softmax(torch.where(kept, scaled, torch.full_like(scaled, fill)), dim=-1)
                assert float(probs[~kept].sum()) == 0
