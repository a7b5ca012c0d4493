"""The core: steps, the Conversation and its ledger, the model history (ChatSession), errors.

Nothing here knows a provider, pandas or the notebook.
"""
