"""A synthetic packet corpus for the search benchmarks: deterministic, varied, realistic-ish.

Each packet reads like a session summary: a goal naming two topics and a
service, decisions, attempts and a next step built from ~120 technical
topics and common English, plus a service name drawn from 20,000 (a rare
word: about five packets each at 100,000). Queries (``QUERIES``) mix rare
and common words, two-word ANDs, a phrase, a prefix and a tag qualifier.
"""

from __future__ import annotations

import json
import random


def _words(text: str) -> list[str]:
    return text.split()


TOPICS = _words(
    "auth oauth token refresh session cookie login logout password sso saml jwt cache redis"
    " memcached eviction ttl invalidation migration schema postgres sqlite mysql index"
    " vacuum replica failover backup restore scheduler cron timer queue kafka rabbitmq retry"
    " backoff timeout deadline latency throughput flaky test pytest fixture mock ci pipeline"
    " deploy docker kubernetes helm terraform lambda dynamodb s3 cloudfront dns tls"
    " certificate proxy nginx websocket grpc rest graphql pagination cursor search ranking"
    " snippet tokenizer unicode encoding logging metrics tracing alert dashboard oncall"
    " incident rollback feature flag config secret vault rotation billing invoice stripe"
    " webhook email template markdown parser lexer compiler bundler webpack vite react"
    " hydration render state reducer hook accessibility i18n locale timezone calendar export"
    " import csv upload thumbnail ffmpeg video audio worker thread async await deadlock race"
    " mutex"
)
WORDS = _words(
    "the a to of and in for on with that this we it was not but be as by from keep use make"
    " after before when because still only first next then again more less faster slower"
    " broke fixed works failed change changed move moved add added remove removed check"
)
TAGS = ("infra", "backend", "frontend", "testing", "perf", "security", "data", "docs")
SERVICES = 20_000


def _sentence(rng: random.Random, topics: int, words: int) -> str:
    picks = rng.sample(TOPICS, topics) + rng.choices(WORDS, k=words)
    rng.shuffle(picks)
    return " ".join(picks).capitalize() + "."


def packet(n: int, packet_id: str) -> dict[str, object]:
    rng = random.Random(n)
    a, b = rng.sample(TOPICS, 2)
    service = f"svc{rng.randrange(SERVICES):05d}"
    created = f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:{n % 59:02d}Z"
    return {
        "ltm_version": "0.2",
        "id": packet_id,
        "created_at": created,
        "project": {"name": f"project-{n % 50}"},
        "goal": f"Fix the {a} {b} problem in {service}",
        "decisions": [
            {"what": _sentence(rng, 3, 5), "why": _sentence(rng, 2, 6), "locked": n % 3 == 0}
            for _ in range(2)
        ],
        "attempts": [
            {"tried": _sentence(rng, 3, 4), "outcome": "failed", "learned": _sentence(rng, 2, 5)}
        ],
        "open_questions": [_sentence(rng, 2, 4)],
        "next_step": _sentence(rng, 3, 5),
        "tags": sorted(set(rng.sample(TAGS, 2))),
    }


def body(n: int, packet_id: str) -> bytes:
    return json.dumps(packet(n, packet_id), separators=(",", ":"), sort_keys=True).encode()


QUERIES = (
    "svc01234",  # a rare word: a handful of packets
    "oauth",  # a topic: ~8% of packets
    "oauth retry",  # two topics, both required
    '"retry backoff"',  # a phrase
    "migrat*",  # a prefix
    "deploy tag:infra",  # a word and a tag
    "deadlock mutex race",  # three words
    "svc0999* project:project-7",  # a prefix and a project
)
WORST = "the"  # a stop word in nearly every packet: the pathological case
