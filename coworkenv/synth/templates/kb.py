"""Templates about the knowledge base: policy facts, earlier versions, creating and updating articles, and
archiving an outdated one (an outdated policy article or an earlier version is a distractor).

Nothing is constant: what a task names is read from its workspace's initial state, and every choice is drawn from ``rng``.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ...workspace import load_world
from ._kit import answer_check, first_id, sql_check, step, task_spec, template, unsolved
from ._records import kb_article_rows

# (policy title, what a task asks, the pattern of the figure in the article's body)
POLICY_FACTS = (
    ("Travel expense policy", "the daily meal allowance", r"Meals are reimbursed up to (\d+ [A-Z]{3}) a day"),
    ("Travel expense policy", "the nightly hotel limit that needs no approval", r"Hotels up to (\d+ [A-Z]{3}) a night"),
    ("Password and MFA policy", "how often passwords must be changed", r"changed every (\d+ days)"),
    ("Purchase approval limits", "the amount above which a purchase needs approval", r"Purchases above (\d+ [A-Z]{3})"),
    ("Remote work policy", "how many days a week one may work remotely", r"up to (\d+ days) a week"),
)


# --------------------------------------------------------------------------- lookup


@template("lookup", 2, needs=("kb_articles",))
def kb_policy(conn, rng):
    articles = {a["title"]: a for a in kb_article_rows(conn) if a["status"] == "published"}
    options = [(t, q, re.search(p, articles[t]["body"])) for t, q, p in POLICY_FACTS if t in articles]
    options = [(t, q, m.group(1)) for t, q, m in options if m]
    if not options:
        return None
    title, question, value = rng.choice(options)
    article = articles[title]
    return task_spec(
        f"According to our knowledge base, what is {question}? Use the current policy.",
        [answer_check("answer", f"the answer gives {value}", value)],
        [step("kb_search_articles", query=title), step("kb_get_article", id=article["id"])],
        f"{title} ({article['id']}): {question} is {value}.",
        ["kb_archive_article", "kb_update_article"], step("kb_archive_article", id=article["id"]))


@template("lookup", 3, needs=("kb_articles",))
def kb_old_version(conn, rng):
    articles = {a["title"]: a for a in kb_article_rows(conn) if a["status"] == "published" and a["version"] > 1}
    options = []
    for title, question, pattern in POLICY_FACTS:
        if title not in articles:
            continue
        first = conn.execute("select body from kb_versions where article = ? and version = 1",
                             (articles[title]["id"],)).fetchone()
        old, new = re.search(pattern, first[0]) if first else None, re.search(pattern, articles[title]["body"])
        if old and new and old.group(1) != new.group(1):
            options.append((title, question, old.group(1), new.group(1)))
    if not options:
        return None
    title, question, old, new = rng.choice(options)
    article = articles[title]
    return task_spec(
        f"The \"{title}\" article in the knowledge base was revised. What did its first version say "
        f"about {question}, and what does the current version say?",
        [answer_check("answer", f"the answer gives the old {old} and the current {new}", old, new)],
        [step("kb_search_articles", query=title), step("kb_list_versions", id=article["id"]),
         step("kb_get_article", id=article["id"], version=1), step("kb_get_article", id=article["id"])],
        f"Version 1 of {article['id']} said {old}; the current version says {new}.",
        ["kb_update_article", "kb_archive_article"], step("kb_update_article", id=article["id"], body="(reverted)"))


# --------------------------------------------------------------------------- single write


@template("single_write", 2, needs=("kb_articles",))
def kb_create(conn, rng):
    world = load_world(conn)
    title, body = rng.choice([
        ("How to request a new laptop", "Open a ticket with the Operations team; laptops ship within {n} working days."),
        ("How to join the on-call rota", "Ask your team lead; each rotation lasts {n} days and starts on a Monday."),
        ("How to order office supplies", "Use the price list workbook and send the order by the {n}th of the month."),
        ("How to report a phishing email", "Forward it to security and delete it; we answer within {n} hours."),
    ])
    body = body.format(n=rng.randint(2, 20))
    tags = rng.sample(["onboarding", "operations", "equipment", "security", "office"], 2)
    return unsolved(conn, task_spec(
        f"Publish a how-to article in the knowledge base titled \"{title}\" that says: \"{body}\" "
        f"Tag it {tags[0]} and {tags[1]}.",
        [sql_check("article", f"a published how-to titled {title!r} with the text",
                   "select count(*) from kb_articles where title = ? and category = 'how-to' and "
                   "status = 'published' and instr(body, ?) > 0 and instr(tags, ?) > 0 and instr(tags, ?) > 0",
                   [title, body, tags[0], tags[1]])],
        [step("kb_create_article", title=title, body=body, category="how-to", tags=tags)],
        f"Published \"{title}\" ({world['company']['name']} knowledge base).",
        ["kb_archive_article"], step("kb_archive_article", id=first_id(conn, "kb_articles"))))


@template("single_write", 3, needs=("kb_articles",))
def kb_update(conn, rng):
    articles = {a["title"]: a for a in kb_article_rows(conn) if a["status"] == "published"}
    options = []
    for title, question, pattern in POLICY_FACTS:
        m = re.search(pattern, articles[title]["body"]) if title in articles else None
        if m:
            options.append((title, question, m))
    if not options:
        return None
    title, question, m = rng.choice(options)
    article = articles[title]
    number, unit = m.group(1).split(" ", 1)
    new_value = f"{int(number) + rng.choice([5, 10, 15, 30])} {unit}"
    new_body = article["body"][:m.start(1)] + new_value + article["body"][m.end(1):]
    return task_spec(
        f"Update the knowledge base's \"{title}\": {question} changes from {m.group(1)} to {new_value}. "
        "Change only that figure.",
        [sql_check("updated", f"{article['id']} has a new version stating {new_value}",
                   "select count(*) from kb_articles where id = ? and version = ? and instr(body, ?) > 0 and "
                   "instr(body, ?) = 0", [article["id"], article["version"] + 1, new_value, m.group(0)])],
        [step("kb_search_articles", query=title), step("kb_get_article", id=article["id"]),
         step("kb_update_article", id=article["id"], body=new_body)],
        f"Updated {article['id']}: {question} is now {new_value}.",
        ["kb_archive_article"], step("kb_archive_article", id=article["id"]))


# --------------------------------------------------------------------------- multi-step chains


def _outdated(conn: sqlite3.Connection) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Published articles beside the current one of the same title ("Remote work policy (2023)"): (outdated, current)."""
    articles = kb_article_rows(conn)
    return [(old, cur) for old in articles for cur in articles
            if old["status"] == "published" and cur["status"] == "published"
            and re.fullmatch(re.escape(cur["title"]) + r" \(\d{4}\)", old["title"])]


@template("multi_step", 3, needs=("kb_articles",), draws=_outdated)
def kb_archive_outdated(conn, rng, old, current):
    return task_spec(
        f"The knowledge base has two \"{current['title']}\" articles. Archive the outdated one and keep the current one.",
        [sql_check("archived", f"{old['id']} is archived and {current['id']} still published",
                   "select (select status from kb_articles where id = ?) = 'archived' and "
                   "(select status from kb_articles where id = ?) = 'published'", [old["id"], current["id"]])],
        [step("kb_list_articles", category="policy"), step("kb_get_article", id=old["id"]),
         step("kb_get_article", id=current["id"]), step("kb_archive_article", id=old["id"])],
        f"Archived the outdated {old['id']} (\"{old['title']}\"); {current['id']} stays.",
        ["kb_update_article"], step("kb_update_article", id=current["id"], body=old["body"]))
