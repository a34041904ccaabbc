"""Why an artifact could not be had, split by what the caller should do next.

The agent reports a model ``rejected`` when the artifact itself is at fault (a
retry of the same document can only fail the same way) and ``failed`` when the
network or the server is (a later retry resumes where this one stopped).
"""

from __future__ import annotations

from edgebox.errors import InvalidArgument, Unavailable


class ArtifactRejected(InvalidArgument):
    """The artifact is not what the document declared, or is unsafe to unpack."""


class ArtifactUnavailable(Unavailable):
    """The artifact could not be fetched now; the bytes already fetched are kept."""
