"""The ledger's end-user options, as a part of its configuration (`ledger:` in the YAML;
`LedgerOptions.end_user_ids` reads the secret from the environment)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class EndUserHashOptions(BaseModel):
    # end users stored as sent, or as an HMAC keyed by the variable named (never the secret)
    end_user_hash: Literal["none", "hmac"] = "none"
    end_user_hash_key_env: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]*$")

    @model_validator(mode="after")
    def _hash_key_named(self) -> EndUserHashOptions:
        if self.end_user_hash == "hmac" and self.end_user_hash_key_env is None:
            raise ValueError("end_user_hash: hmac needs end_user_hash_key_env (a variable's name)")
        return self

    def end_user_key_env(self) -> str | None:
        """The variable holding the HMAC's secret, None when ids are stored as sent."""
        return self.end_user_hash_key_env if self.end_user_hash == "hmac" else None
