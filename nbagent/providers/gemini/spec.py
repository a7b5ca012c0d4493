"""The Gemini Developer API wire's facts (see ``providers/wire_spec.py``)."""

from ..wire_spec import WireSpec

SPEC = WireSpec(
    package="gemini",
    prefixes=("gemini", "google"),
    factory="nbagent.providers.gemini.provider:GeminiProvider",
    default_model="gemini-2.5-flash",
    key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    pricing_id="google",
    token_names={
        "prompt_token_count": "promptTokenCount + toolUsePromptTokenCount",
        "cached_content_token_count": "cachedContentTokenCount",
        "cache_write_token_count": "",  # implicit caching: nothing is reported as written
        "thoughts_token_count": "thoughtsTokenCount",
        "candidates_token_count": "candidatesTokenCount",  # thoughts are not among them
        "total_token_count": "totalTokenCount",
    },
    usage_paths=("usageMetadata",),
    model_prefixes=("gemini",),
    otel_name="gcp.gemini",
)
