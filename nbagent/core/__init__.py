"""The core: steps, the Conversation and its ledger, the wire history (ChatSession), errors.

Nothing here knows a provider, pandas or the notebook.
"""
