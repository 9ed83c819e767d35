"""The world of a workspace: the people, organisations, projects, products and dates that every app
draws its records from, made once per workspace from its seed.

Apps never invent the people or projects they mention: the sender of a mail is a person of the
world, who is also a contact, a CRM account's owner, a ticket's assignee; a project code appears in
a budget sheet, a chat channel and invoices. That is what lets a task join facts across apps. The
world is drawn with Faker from the workspace's seed, over several locales, and holds deliberate
near-duplicates (two people with nearly the same name) for tasks to tell apart. Nothing in it is
the same in every workspace: names, companies, codes, prices and even the workspace's today vary.

The world is a plain JSON-able dict (apps run under ``python3 -I -S`` in the sandbox and import
nothing outside the standard library, so they receive it as data); ``write_world`` also stores
it in the state, as the ``world_*`` tables, for synthesis to read::

    {"seed", "today", "user": person, "company": organisation,
     "people": [person], "organisations": [organisation], "projects": [project], "products": [product]}

    person        {"id": "p01", "name", "first", "last", "email", "phone", "role", "department",
                   "org": organisation id, "manager": person id | None, "city", "locale"}
    organisation  {"id": "o01", "name", "domain", "kind": employer|customer|vendor|partner, "industry",
                   "city", "country"}
    project       {"code": "PRJ-123", "name", "owner": person id, "client": organisation id | None,
                   "budget": int, "status": active|planned|closed, "start", "end"}
    product       {"sku": "SKU-1234", "name", "category", "price": float, "unit", "supplier": organisation id}
"""

from __future__ import annotations

import datetime as dt
import random
import re
import sqlite3
import threading
import unicodedata
from typing import Any

from faker import Faker

World = dict[str, Any]

LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR", "sv_SE", "pl_PL", "da_DK", "fi_FI")
DEPARTMENTS = {
    "Engineering": ("Engineering lead", "Backend engineer", "Frontend engineer", "Site reliability engineer",
                    "Security engineer", "QA engineer"),
    "Finance": ("Finance analyst", "Controller", "Accounts payable clerk", "Procurement specialist"),
    "Product": ("Product manager", "Designer", "UX researcher"),
    "Sales": ("Account executive", "Sales engineer", "Customer success manager"),
    "Operations": ("Office manager", "Operations lead", "IT administrator"),
    "People": ("HR partner", "Recruiter"),
    "Legal": ("Legal counsel", "Compliance officer"),
    "Support": ("Support agent", "Support lead"),
}
EXTERNAL_ROLES = ("Account manager", "Billing", "Consultant", "Procurement lead", "CTO", "Project lead",
                  "Operations manager", "Sales representative")
INDUSTRIES = ("logistics", "retail", "healthcare", "energy", "media", "banking", "manufacturing", "education",
              "travel", "insurance")
PROJECT_WORDS = ("migration", "redesign", "onboarding", "audit", "rollout", "budget", "launch", "integration",
                 "renewal", "consolidation")
PRODUCTS = {
    "hardware": (("Laptop", "unit", 900, 2200), ("Monitor", "unit", 140, 620), ("Docking station", "unit", 90, 260),
                 ("Headset", "unit", 40, 240), ("Keyboard", "unit", 25, 160)),
    "office": (("Printer paper", "box", 18, 45), ("Notebook", "pack", 6, 24), ("Whiteboard markers", "pack", 5, 19)),
    "software": (("Design suite licence", "seat", 180, 720), ("Cloud storage plan", "seat", 60, 300),
                 ("Security scanner licence", "seat", 240, 960)),
    "services": (("Consulting day", "day", 600, 1600), ("Training session", "session", 350, 1400)),
}


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", _ascii(text).lower())


def _monday(rng: random.Random) -> dt.date:
    """A Monday of 2026 before December, so that a month of calendar fits after it."""
    first = dt.date(2026, 1, 5)
    return first + dt.timedelta(weeks=rng.randrange(0, 46))


def _city(faker: Faker) -> str:
    """A city of the faker's locale. Some locales keep their cities in an order that changes from one
    Python process to the next (built from a set); drawing from them sorted keeps a seed's world the same."""
    cities = next((p.cities for p in faker.providers if isinstance(getattr(p, "cities", None), (list, tuple))), None)
    if cities:
        return faker.random_element(sorted(set(cities)))
    return faker.city()


_FAKERS = threading.local()


def _fakers() -> dict[str, Faker]:
    """A Faker per locale, made once per thread (~14 ms each, against the few milliseconds a world
    takes to draw) and seeded again for every world: what one draws depends on its seed alone."""
    made = getattr(_FAKERS, "by_locale", None)
    if made is None:
        made = _FAKERS.by_locale = {locale: Faker(locale) for locale in LOCALES}
    return made


def build_world(seed: int) -> World:
    """The world of a workspace of ``seed``: the same seed gives the same world."""
    rng = random.Random(f"world:{seed}")
    fakers = _fakers()
    for n, faker in enumerate(fakers.values()):
        faker.seed_instance(seed * 1009 + n)
    home = rng.choice(LOCALES[:4])

    def company_name(faker: Faker) -> str:
        name = re.split(r"[,&]| and | und | et | y | e ", faker.company())[0].strip()
        return _ascii(name).strip(" .-") or faker.last_name()

    organisations: list[dict[str, Any]] = []
    used_domains: set[str] = set()

    def organisation(kind: str) -> dict[str, Any]:
        faker = fakers[rng.choice(LOCALES)] if kind != "employer" else fakers[home]
        name = company_name(faker)
        domain = _slug(name)[:20] or f"org{len(organisations) + 1}"
        while domain in used_domains:
            domain += str(rng.randint(2, 9))
        used_domains.add(domain)
        org = {"id": f"o{len(organisations) + 1:02d}", "name": name, "domain": f"{domain}.example", "kind": kind,
               "industry": rng.choice(INDUSTRIES), "city": _ascii(_city(faker)), "country": faker.current_country()}
        organisations.append(org)
        return org

    company = organisation("employer")
    for kind in ("customer",) * 4 + ("vendor",) * 3 + ("partner",) * 2:
        organisation(kind)

    people: list[dict[str, Any]] = []
    used_emails: set[str] = set()

    def person(org: dict[str, Any], role: str, department: str, locale: str, first: str | None = None,
               last: str | None = None) -> dict[str, Any]:
        faker = fakers[locale]
        first = first or _ascii(faker.first_name())
        last = last or _ascii(faker.last_name())
        local = f"{_slug(first)}.{_slug(last)}" or f"person{len(people) + 1}"
        email = f"{local}@{org['domain']}"
        n = 2
        while email in used_emails:
            email, n = f"{local}{n}@{org['domain']}", n + 1
        used_emails.add(email)
        entry = {"id": f"p{len(people) + 1:02d}", "name": f"{first} {last}", "first": first, "last": last,
                 "email": email, "phone": f"+{rng.randint(30, 49)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
                 "role": role, "department": department, "org": org["id"], "manager": None,
                 "city": org["city"], "locale": locale}
        people.append(entry)
        return entry

    user_department = rng.choice(("Operations", "Product", "Finance", "Engineering"))
    user = person(company, rng.choice(DEPARTMENTS[user_department]), user_department, home)
    leads: dict[str, dict[str, Any]] = {}
    for department, roles in DEPARTMENTS.items():
        for role in rng.sample(roles, min(len(roles), rng.randint(2, 3))):
            colleague = person(company, role, department, rng.choice(LOCALES))
            if department in leads:
                colleague["manager"] = leads[department]["id"]
            else:
                leads[department] = colleague
    user["manager"] = leads[user_department]["id"] if leads[user_department] is not user else None
    for org in organisations[1:]:
        for _ in range(rng.randint(2, 3)):
            person(org, rng.choice(EXTERNAL_ROLES), "", rng.choice(LOCALES))
    # near-duplicates: a namesake of a colleague at another organisation, and a colleague whose first
    # name differs from another's by one letter, for tasks to tell apart
    colleagues = [p for p in people if p["org"] == company["id"] and p is not user]
    twin = rng.choice(colleagues)
    person(rng.choice(organisations[1:]), rng.choice(EXTERNAL_ROLES), "", twin["locale"], first=twin["first"],
           last=twin["last"])
    near = rng.choice([p for p in colleagues if p is not twin and len(p["first"]) > 3])
    variant = near["first"][:-1] + ("a" if near["first"][-1] != "a" else "e")
    person(company, rng.choice(DEPARTMENTS[near["department"] or "Operations"]), near["department"] or "Operations",
           near["locale"], first=variant, last=near["last"])

    today = _monday(rng)
    projects = []
    codes = rng.sample(range(100, 1000), 8)
    for n, code in enumerate(codes):
        client = rng.choice(organisations[1:5]) if rng.random() < 0.6 else None
        topic = _ascii(fakers[home].catch_phrase()).split()
        name = f"{topic[-1].capitalize()} {rng.choice(PROJECT_WORDS)}" if topic else f"Project {code}"
        start = today + dt.timedelta(days=rng.randint(-120, 30))
        status = "closed" if n == 7 else ("planned" if start > today else "active")
        projects.append({"code": f"PRJ-{code}", "name": name, "owner": rng.choice(colleagues + [user])["id"],
                         "client": client["id"] if client else None, "budget": rng.randrange(20_000, 400_000, 500),
                         "status": status, "start": start.isoformat(),
                         "end": (start + dt.timedelta(days=rng.randint(60, 240))).isoformat()})

    vendors = [o for o in organisations if o["kind"] == "vendor"]
    products = []
    skus = rng.sample(range(1000, 10_000), sum(len(items) for items in PRODUCTS.values()))
    for category, items in PRODUCTS.items():
        for name, unit, low, high in items:
            brand = _ascii(fakers[rng.choice(LOCALES)].last_name())
            products.append({"sku": f"SKU-{skus[len(products)]}", "name": f"{brand} {name.lower()}"
                             if category == "hardware" else name, "category": category,
                             "price": round(rng.uniform(low, high), 2), "unit": unit,
                             "supplier": rng.choice(vendors)["id"]})

    return {"seed": seed, "today": today.isoformat(), "user": user, "company": company, "people": people,
            "organisations": organisations, "projects": projects, "products": products}


WORLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS world_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS world_people (id TEXT PRIMARY KEY, name TEXT, first TEXT, last TEXT, email TEXT,
    phone TEXT, role TEXT, department TEXT, org TEXT, manager TEXT, city TEXT, locale TEXT);
CREATE TABLE IF NOT EXISTS world_organisations (id TEXT PRIMARY KEY, name TEXT, domain TEXT, kind TEXT,
    industry TEXT, city TEXT, country TEXT);
CREATE TABLE IF NOT EXISTS world_projects (code TEXT PRIMARY KEY, name TEXT, owner TEXT, client TEXT,
    budget INTEGER, status TEXT, start TEXT, "end" TEXT);
CREATE TABLE IF NOT EXISTS world_products (sku TEXT PRIMARY KEY, name TEXT, category TEXT, price REAL,
    unit TEXT, supplier TEXT);
"""


def write_world(conn: sqlite3.Connection, world: World) -> None:
    """Store the world in a state database (the ``world_*`` tables): what synthesis reads of it."""
    conn.executescript(WORLD_SCHEMA)
    conn.executemany("INSERT INTO world_meta VALUES (?, ?)", [
        ("seed", str(world["seed"])), ("today", world["today"]), ("user", world["user"]["id"]),
        ("company", world["company"]["id"])])
    for table, rows in (("world_people", world["people"]), ("world_organisations", world["organisations"]),
                        ("world_projects", world["projects"]), ("world_products", world["products"])):
        columns = list(rows[0])
        conn.executemany(f"INSERT INTO {table} ({', '.join(repr(c) if c == 'end' else c for c in columns)}) "
                         f"VALUES ({', '.join('?' for _ in columns)})", [[row[c] for c in columns] for row in rows])


def load_world(conn: sqlite3.Connection) -> World:
    """The world a state database holds (``write_world``'s inverse)."""
    def rows(table: str) -> list[dict[str, Any]]:
        cursor = conn.execute(f"SELECT * FROM {table} ORDER BY rowid")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    meta = dict(conn.execute("SELECT key, value FROM world_meta").fetchall())
    people = rows("world_people")
    organisations = rows("world_organisations")
    by_person = {p["id"]: p for p in people}
    by_org = {o["id"]: o for o in organisations}
    return {"seed": int(meta["seed"]), "today": meta["today"], "user": by_person[meta["user"]],
            "company": by_org[meta["company"]], "people": people, "organisations": organisations,
            "projects": rows("world_projects"), "products": rows("world_products")}
