"""A session file with a second top-level ``turns`` key is refused by ``load_sessions`` as
``Conversation.load`` refuses it (#48.10).

``load_sessions`` reads a file's head up to the ledger and stops there, so a second ledger written
after the steps (a hand edit, a forged file) was never seen: the usage frame counted one ledger and
``Conversation.load`` refused the file. Now both refuse it; a "turns" key nested anywhere, or the word
in a prompt, is still fine.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pandas")

from nbagent import Conversation, StorageError, list_sessions, load_sessions  # noqa: E402
from nbagent.core.session_file import read_session_ledger, save_conversation  # noqa: E402

from support.many_sessions import synthetic_state  # noqa: E402


def forged_ledger(text: str, key: str = '"turns"') -> str:
    """``text`` with a second ledger, claiming a huge usage, appended at the end of the top level."""
    doc = json.loads(text)
    forged = [dict(t, usage={"prompt_token_count": 10**9, "total_token_count": 10**9}) for t in doc["turns"]]
    return text.rstrip()[:-1] + f",{key}:" + json.dumps(forged) + "}"


@pytest.mark.parametrize("key", ['"turns"', '"\\u0074urns"'])
def test_a_second_ledger_after_the_steps_is_refused_by_load_sessions_too(tmp_path, key):
    path = save_conversation(synthetic_state(3, 4), tmp_path / "s.json")
    forged = tmp_path / "forged.json"
    forged.write_text(forged_ledger(path.read_text(encoding="utf-8"), key), encoding="utf-8")
    with pytest.raises(StorageError, match='has the key "turns" twice'):
        Conversation.load(forged)
    with pytest.raises(StorageError, match='forged.json has the key "turns" twice'):
        load_sessions(forged)
    with pytest.raises(StorageError, match="twice"):
        read_session_ledger(forged)
    listed = list_sessions(tmp_path)
    assert listed.set_index("path").loc[str(forged), "error"].endswith("twice (a damaged or edited file: nbagent "
                                                                       "writes each key once, and JSON would keep "
                                                                       "the last one silently)")
    assert len(load_sessions(path)) == 4  # the file as written still loads


def test_turns_nested_in_the_steps_or_in_text_is_no_second_ledger(tmp_path):
    state = synthetic_state(4, 3)
    state.turns[0].prompt = 'what are "turns": in a game?'
    state.steps[-1].structured_output = {"turns": [1, 2, 3]}
    path = save_conversation(state, tmp_path / "s.json")
    assert path.read_text(encoding="utf-8").count('"turns"') >= 2
    assert len(load_sessions(path)) == 3 and len(Conversation.load(path).turns) == 3
