"""The key of the `hash` action: read from an environment variable or a file, never a recipe.

The same value hashes to the same token across a corpus (and across runs with the same
key), so a model can still learn that two mentions are one address without learning the
address. The key's identity, an HMAC of a fixed label under the key, enters the stage's
fingerprint: a new key makes a new version, and the fingerprint reveals nothing about the
key. Values are hashed with HMAC-SHA256, so a dictionary of likely values cannot be
hashed and compared without the key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from curate.errors import CurateError, shown

IDENTITY_LABEL = b"curate.pii.key-identity.v1"
MIN_KEY_BYTES = 16


def load_key(env: str, file: str | None, base_dir: str) -> bytes:
    """The key bytes; errors name where the key was looked for, never its content."""
    if file is not None:
        path = Path(base_dir, file) if not Path(file).is_absolute() else Path(file)
        try:
            key = path.read_bytes().strip()
        except OSError as exc:
            raise CurateError(
                f"pii: cannot read the hash key file {shown(path)}: {exc.strerror}"
            ) from None
        where = f"file {shown(path)}"
    else:
        value = os.environ.get(env)
        if value is None:
            raise CurateError(
                f"pii: the hash action needs a key in the environment variable {env} "
                "(or name a key file with hash_key_file)"
            )
        key = value.strip().encode()
        where = f"environment variable {env}"
    if len(key) < MIN_KEY_BYTES:
        raise CurateError(f"pii: the hash key in {where} is shorter than {MIN_KEY_BYTES} bytes")
    return key


def key_identity(key: bytes) -> str:
    """Names the key without revealing it: HMAC-SHA256 of a fixed label, 16 hex digits."""
    return hmac.new(key, IDENTITY_LABEL, hashlib.sha256).hexdigest()[:16]


def token(key: bytes, entity: str, value: str, digits: int) -> str:
    """The replacement of a hashed value: its type and a keyed digest of its text."""
    digest = hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return f"<{entity}:{digest[:digits]}>"
