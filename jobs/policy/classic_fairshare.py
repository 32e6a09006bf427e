"""Slurm's classic fair-share factor (PriorityFlags=NO_FAIR_TREE), for the multifactor baseline.

The association tree is root -> tier -> organization -> project -> user: a tier is an
account of root, an organization a sub-account of its tier, a project a sub-account of its
organization, and users are the leaves that jobs charge. Following Slurm's
priority_multifactor.c and https://slurm.schedmd.com/classic_fair_share.html:

    S  = (S_self / S_level) * (S_parent / S_parent_level) * ...      normalized shares
    UN = U_self / U_root                                             normalized usage
    UE = UN                                    for a child of root   effective usage
    UE = UN + (UE_parent - UN) * S_self / S_level                    below
    F  = 2 ** (-UE / S)

Raw shares: `TierSpec.weight`, `Snapshot.org_weights`, `project_weights` and
`user_weights` (default 1). A level holds the organizations with jobs running or queued
(their jobs name their tier) and the projects and users the snapshot knows (usage, running
or queued). Usage: `Snapshot.usage`, `project_usage` and `user_usage` (decayed GPU-seconds,
`usage_half_life_s` playing PriorityDecayHalfLife); root's is every organization's; a tier's
its organizations'; a project or user the snapshot gives no usage for has its parent's when
it is the only child (a snapshot that counts usage per organization only), else none.
"""

from __future__ import annotations

from collections import defaultdict

from .types import Snapshot

Leaf = tuple[str, str, str]  # (org, project, user)


def classic_fairshare(snap: Snapshot) -> dict[Leaf, float]:
    """Fair-share factor of every (org, project, user) the snapshot knows, in [0, 1]."""
    tree = _Tree(snap)
    root_usage = sum(snap.usage.values())
    out: dict[Leaf, float] = {}
    for tier, orgs in tree.orgs.items():
        un_tier = tree.tier_usage[tier] / root_usage if root_usage > 0 else 0.0
        s_tier = tree.tier_share(tier)
        level = sum(snap.org_weights.get(o, 1.0) for o in orgs)
        for org in orgs:
            s_org = snap.org_weights.get(org, 1.0) / level
            ue_org = _effective(tree.usage(org), root_usage, un_tier, s_org)
            out.update(_users(tree, snap, org, root_usage, ue_org, s_tier * s_org))
    return out


def _effective(usage: float, root_usage: float, ue_parent: float, share: float) -> float:
    un = usage / root_usage if root_usage > 0 else 0.0
    return un + (ue_parent - un) * share


def _users(tree: _Tree, snap: Snapshot, org: str, root_usage: float, ue_org: float,
           s_org: float) -> dict[Leaf, float]:
    """The factors of an organization's users, through its projects; `s_org` is the
    organization's normalized share."""
    out: dict[Leaf, float] = {}
    projects = tree.projects[org]
    p_level = sum(snap.project_weights.get((org, p), 1.0) for p in projects)
    for project, users in projects.items():
        s_p = snap.project_weights.get((org, project), 1.0) / p_level
        ue_p = _effective(tree.project_usage(org, project), root_usage, ue_org, s_p)
        u_level = sum(snap.user_weights.get((org, u), 1.0) for u in users)
        for user in users:
            s_u = snap.user_weights.get((org, user), 1.0) / u_level
            ue_u = _effective(tree.user_usage(org, project, user), root_usage, ue_p, s_u)
            share = s_org * s_p * s_u
            out[org, project, user] = 2.0 ** (-ue_u / share) if share > 0 else 0.0
    return out


class _Tree:
    """The associations the snapshot knows, and their raw usage."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.orgs: dict[str, list[str]] = defaultdict(list)  # tier -> orgs
        self.projects: dict[str, dict[str, list[str]]] = defaultdict(dict)  # org -> users
        tier_of: dict[str, str] = {}
        leaves = [(r.tier, r.org, r.project, r.user) for r in snap.running]
        leaves += [(j.tier, j.org, j.project, j.user) for j in snap.queued]
        for tier, org, project, user in leaves:
            if org not in tier_of:
                tier_of[org] = tier
                self.orgs[tier].append(org)
            users = self.projects[org].setdefault(project, [])
            if user not in users:
                users.append(user)
        for org, project, user in snap.user_usage:
            if org in tier_of:
                users = self.projects[org].setdefault(project, [])
                if user not in users:
                    users.append(user)
        for org, project in snap.project_usage:
            if org in tier_of:
                self.projects[org].setdefault(project, [""])
        self.tier_usage = {t: sum(self.usage(o) for o in orgs) for t, orgs in self.orgs.items()}

    def tier_share(self, tier: str) -> float:
        weights = {t: (s.weight if (s := self.snap.tiers.get(t)) else 1.0) for t in self.orgs}
        total = sum(weights.values())
        return weights[tier] / total if total > 0 else 0.0

    def usage(self, org: str) -> float:
        return self.snap.usage.get(org, 0.0)

    def project_usage(self, org: str, project: str) -> float:
        known = self.snap.project_usage.get((org, project))
        if known is not None:
            return known
        return self.usage(org) if len(self.projects[org]) == 1 else 0.0

    def user_usage(self, org: str, project: str, user: str) -> float:
        known = self.snap.user_usage.get((org, project, user))
        if known is not None:
            return known
        only = len(self.projects[org][project]) == 1
        return self.project_usage(org, project) if only else 0.0
