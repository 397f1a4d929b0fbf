"""Batches that end badly and journals that cannot be read, against the loopback fakes of
OpenAI's and Anthropic's batch APIs (fixtures/provider_fakes.py): a failed batch is reported
once and its requests submitted again on re-run (or reported, with batch_failed=stop); a
corrupted journal never makes a run pay twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.provider_fakes import FakeProviders

from assay.models.api.anthropic_chat import AnthropicChatLM
from assay.models.api.batch_journal import BatchJournal, batch_id_of, file_name
from assay.models.api.batch_route import flat_body
from assay.models.api.batches import BatchRun
from assay.models.api.openai import OpenAIChatLM
from assay.models.api.runner import APIRequestError
from assay.requests.types import GenerateRequest, GenParams

REQUESTS = [GenerateRequest(f"question {i}", GenParams(max_gen_toks=8)) for i in range(5)]
ANSWERS = [f"answer: question {i}" for i in range(5)]


def _lm(provider, fake, tmp_path, **args):
    settings = {"batch_dir": str(tmp_path / "batches"), "batch_poll_interval": 0.01, **args}
    if provider == "openai":
        return OpenAIChatLM(model="gpt-test", base_url=fake.openai_url, batch_api=True, **settings)
    return AnthropicChatLM(
        model="claude-test", base_url=fake.anthropic_url, batch_api=True, **settings
    )


def _journal(tmp_path):
    return {p.name: json.loads(p.read_text()) for p in (tmp_path / "batches").glob("*.json")}


# -- a batch the provider fails -------------------------------------------------------------------


def test_a_failed_batch_is_reported_once_then_resubmitted_on_rerun(tmp_path, capsys):
    with FakeProviders(fail_batch=lambda n: n == 1) as fake:
        with pytest.raises(APIRequestError) as err:
            _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert set(err.value.failures) == {0, 1, 2, 3, 4}
        assert "batch batch_1 failed: Enqueued token limit reached" in err.value.failures[0]
        assert fake.creates == 1
        record = _journal(tmp_path)["batch_1.json"]
        assert record["ended"] == "failed" and len(record["unanswered"]) == 5
        first = capsys.readouterr().err
        assert first.count("batch batch_1 failed") == 1 and "a re-run submits them again" in first

        # The re-run does not follow the dead batch: it submits its requests once more.
        answers = _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS
        assert fake.creates == 2 and len(fake.batch_lines) == 10
        assert "left 5 request(s) unanswered" in capsys.readouterr().err
        # And the next one follows the batch that answered.
        _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert fake.creates == 2


def test_batch_failed_stop_reports_an_earlier_failure_without_sending(tmp_path):
    with FakeProviders(fail_batch=lambda n: n == 1) as fake:
        with pytest.raises(APIRequestError):
            _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        with pytest.raises(APIRequestError) as err:
            _lm("openai", fake, tmp_path, batch_failed="stop").generate_until(REQUESTS)
        assert fake.creates == 1  # nothing sent
        reason = err.value.failures[3]
        assert "batch batch_1 failed" in reason and "--batch-failed stop" in reason
        assert "--batch-failed resubmit" in reason
        # Without stop the same journal leads to one more submission, which answers.
        answers = _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS and fake.creates == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_requests_a_completed_batch_refused_are_resubmitted_alone_on_rerun(provider, tmp_path):
    refused = {"first": True}

    def fate(cid, body, submission):
        if body["messages"][0]["content"] == "question 4" and refused["first"]:
            return "invalid"
        return "ok"

    with FakeProviders(fate=fate) as fake:
        with pytest.raises(APIRequestError) as err:
            _lm(provider, fake, tmp_path).generate_until(REQUESTS)
        # Within the run a refusal (400) is final: reported by index, not sent again; the
        # answers of the same batch are kept.
        assert set(err.value.failures) == {4} and "fake invalid" in err.value.failures[4]
        assert [str(a) for a in err.value.partial[:4]] == ANSWERS[:4]
        assert fake.creates == 1

        with pytest.raises(APIRequestError) as stopped:
            _lm(provider, fake, tmp_path, batch_failed="stop").generate_until(REQUESTS)
        assert set(stopped.value.failures) == {4} and fake.creates == 1

        refused["first"] = False
        answers = _lm(provider, fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS
        # Only the refused request went again, through the batch API.
        assert fake.creates == 2 and len(fake.batch_lines) == 6 and fake.bodies == []


# -- a journal that cannot be read ----------------------------------------------------------------

CORRUPTIONS = {
    "empty": lambda text: "",
    "truncated": lambda text: text[: len(text) // 2],
    "garbled": lambda text: "\x00\xff" + text[5:],
    "not a record": lambda text: "[1, 2, 3]",
    "ids missing": lambda text: json.dumps({"batch_id": "x", "route": "y"}),
}


def _corrupt(tmp_path, how):
    files = list((tmp_path / "batches").glob("*.json"))
    assert len(files) == 1
    files[0].write_text(CORRUPTIONS[how](files[0].read_text()), encoding="utf-8")
    return files[0]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_a_corrupted_journal_of_a_completed_batch_fetches_it(provider, how, tmp_path, capsys):
    with FakeProviders() as fake:
        _lm(provider, fake, tmp_path).generate_until(REQUESTS)
        path = _corrupt(tmp_path, how)
        answers = _lm(provider, fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS
        assert fake.creates == 1  # fetched, not paid for twice
        err = capsys.readouterr().err
        assert f"{path} cannot be read" in err
        # The journal is whole again: the next run follows it without asking.
        assert _journal(tmp_path)[path.name]["batch_id"] == batch_id_of(path)
        _lm(provider, fake, tmp_path).generate_until(REQUESTS)
        assert fake.creates == 1
        assert "cannot be read" not in capsys.readouterr().err


def _interrupted_submit(lm, journal_dir):
    """Submit REQUESTS through `lm`'s batch provider and stop at the first wait, as a run
    killed between submitting and downloading."""

    def stop(_seconds):
        raise KeyboardInterrupt

    provider = lm._batch.provider(lm.endpoint)
    run = BatchRun(provider, BatchJournal([journal_dir]), sleep=stop, report=lambda _: None)
    with pytest.raises(KeyboardInterrupt):
        run.run(
            len(REQUESTS),
            lambda j: flat_body(lm._create_args(lm._prompt(REQUESTS[j]), REQUESTS[j])),
            lambda answers: None,
        )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("how", ["empty", "truncated", "garbled"])
def test_a_corrupted_journal_of_a_batch_in_progress_is_followed(provider, how, tmp_path, capsys):
    with FakeProviders(polls_per_state=10**9) as fake:
        _interrupted_submit(_lm(provider, fake, tmp_path), tmp_path / "batches")
        assert fake.creates == 1
        path = _corrupt(tmp_path, how)
        fake.polls_per_state = 1  # the provider now finishes the batch
        answers = _lm(provider, fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS
        assert fake.creates == 1 and len(fake.batch_lines) == 5
    err = capsys.readouterr().err
    assert f"{path} cannot be read" in err
    if provider == "anthropic":  # its requests are known from its results only
        assert "nothing is submitted before then" in err
    else:  # read back from the input file
        assert "told its 5 request(s)" in err


def test_a_corrupted_journal_followed_by_requests_it_does_not_hold(tmp_path):
    extra = GenerateRequest("question 9", GenParams(max_gen_toks=8))
    with FakeProviders() as fake:
        _lm("anthropic", fake, tmp_path).generate_until(REQUESTS[:3])
        _corrupt(tmp_path, "truncated")
        answers = _lm("anthropic", fake, tmp_path).generate_until([*REQUESTS, extra])
        assert [str(a) for a in answers] == [*ANSWERS, "answer: question 9"]
        # The first three came from the old batch; the other three went in one new batch.
        assert fake.creates == 2 and len(fake.batch_lines) == 6


def test_a_journal_naming_a_batch_the_provider_does_not_know_is_left_alone(tmp_path, capsys):
    folder = tmp_path / "batches"
    folder.mkdir()
    (folder / "batch_77.json").write_text("{", encoding="utf-8")
    with FakeProviders() as fake:
        answers = _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS and fake.creates == 1
    assert "batch batch_77, which its name gives, is not known" in capsys.readouterr().err
    assert (folder / "batch_77.json").read_text() == "{"


@pytest.mark.parametrize("batch_id", ["batch_abc-1", "id/with:odd chars", "ünï", ".."])
def test_journal_file_names_give_the_batch_id_back(batch_id):
    name = file_name(batch_id)
    assert "/" not in name and not name.startswith(".")
    assert batch_id_of(Path(name)) == batch_id


# -- two runs at once ------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_two_runs_sharing_a_journal_submit_once(provider, tmp_path):
    import threading
    import time

    with FakeProviders() as fake:
        create = fake.create_batch

        def slow_create(*args, **kwargs):  # both runs have read the journal by then
            time.sleep(0.5)
            return create(*args, **kwargs)

        fake.create_batch = slow_create
        answers: list = []
        runs = [
            threading.Thread(
                target=lambda: answers.append(
                    _lm(provider, fake, tmp_path).generate_until(REQUESTS)
                )
            )
            for _ in range(2)
        ]
        for run in runs:
            run.start()
        for run in runs:
            run.join(60)
        assert [[str(a) for a in got] for got in answers] == [ANSWERS, ANSWERS]
        assert fake.creates == 1


def test_a_recovered_batch_keeps_its_place_among_later_ones(tmp_path):
    """An older batch recovered from an unreadable file does not hide the batch that later
    answered what it left unanswered (it takes the provider's creation time, not now)."""

    def fate(cid, body, submission):
        return (
            "expired"
            if body["messages"][0]["content"] == "question 0" and submission == 1
            else "ok"
        )

    with FakeProviders(fate=fate) as fake:
        first = _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert fake.creates == 2  # question 0 went again in batch_2
        (tmp_path / "batches" / "batch_1.json").write_text("{", encoding="utf-8")
        again = _lm("openai", fake, tmp_path).generate_until(REQUESTS)
        assert again == first and fake.creates == 2


def test_a_run_with_nothing_to_submit_does_not_wait_for_a_batch_of_unknown_contents(tmp_path):
    others = [GenerateRequest(f"other {i}", GenParams(max_gen_toks=8)) for i in range(2)]
    with FakeProviders() as fake:
        _lm("anthropic", fake, tmp_path).generate_until(REQUESTS)  # msgbatch_1, readable
        lm = _lm("anthropic", fake, tmp_path)

        def stop(_seconds):
            raise KeyboardInterrupt

        provider = lm._batch.provider(lm.endpoint)
        run = BatchRun(provider, BatchJournal([tmp_path / "batches"]), sleep=stop,
                       report=lambda _: None)  # fmt: skip
        with pytest.raises(KeyboardInterrupt):
            run.run(2, lambda j: flat_body(lm._create_args(lm._prompt(others[j]), others[j])),
                    lambda answers: None)  # fmt: skip
        (tmp_path / "batches" / "msgbatch_2.json").write_text("", encoding="utf-8")
        polls = fake.batches["msgbatch_2"]["polls"]
        answers = _lm("anthropic", fake, tmp_path).generate_until(REQUESTS)
        assert [str(a) for a in answers] == ANSWERS and fake.creates == 2
        # Asked about once (to learn it is unfinished), not waited for.
        assert fake.batches["msgbatch_2"]["polls"] == polls + 1
