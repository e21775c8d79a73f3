"""Bearer-token authentication: which user a request comes from.

A real API server tells its clients apart, and admission webhooks decide on that identity
(kadmit's Job webhook lets only its own service account start a Job). So the local cluster
keeps a token → user table instead of one shared token: the admin token given to
:class:`~localcluster.cluster.LocalCluster`, users added by tests, and service-account tokens
minted as the TokenRequest API would.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from kadmit.localcluster.objects import Obj

AUTHENTICATED = "system:authenticated"
ADMIN_USERNAME = "system:admin"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    """An authenticated identity, as ``AdmissionReview.request.userInfo`` carries it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    def info(self) -> Obj:
        """The ``authentication.k8s.io/v1`` UserInfo dict (``uid`` only when there is one)."""
        out: Obj = {"username": self.username}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        return out


ADMIN = User(ADMIN_USERNAME, "", ("system:masters", AUTHENTICATED))


def service_account_user(namespace: str, name: str, uid: str) -> User:
    """The identity a service-account token authenticates as, with the groups the server adds."""
    for label, value in (("namespace", namespace), ("name", name)):
        if not value or ":" in value or "/" in value:
            raise ValueError(f"invalid service account {label} {value!r}")
    return User(
        f"{SA_PREFIX}{namespace}:{name}",
        uid,
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


class TokenAuthenticator:
    """A token → :class:`User` table; with no admin token, unauthenticated requests are the admin."""

    def __init__(self, admin_token: str | None = None) -> None:
        self.admin_token = admin_token
        self._users: dict[str, User] = {}
        if admin_token is not None:
            self.add(admin_token, ADMIN)

    @property
    def required(self) -> bool:
        """Whether a request without a known token is refused (401); off when no admin token is set."""
        return self.admin_token is not None

    def add(self, token: str, user: User) -> None:
        if not token or any(c.isspace() for c in token):
            raise ValueError("a bearer token must be a non-empty string without whitespace")
        known = self._users.get(token)
        if known is not None and known != user:
            raise ValueError(f"this token already authenticates {known.username}")
        if not user.username:
            raise ValueError("a user needs a username")
        self._users[token] = user

    def mint(self, user: User) -> str:
        """A fresh random token for ``user``."""
        token = secrets.token_urlsafe(32)
        self.add(token, user)
        return token

    def lookup(self, token: str) -> User | None:
        """The user ``token`` authenticates as, or None (TokenReview: no admin fallback)."""
        return self._users.get(token)

    def authenticate(self, authorization: str) -> User | None:
        """The user of an ``Authorization`` header value: None for an unknown or missing token
        when authentication is required, the admin when it is not."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer":
            user = self._users.get(token.strip())
            if user is not None:
                return user
        return None if self.required else ADMIN
