"""Contrast sets of the roles of a review or a hiring, and of sibling categories: which
kind of drug, of degree or of pay (``validators.contrasts`` reads them). Session 50's
misfire hunt left them to the verifier, and through the defaults (MiniLM cosine /
verifier score) some were served: hourly / salaried overtime (0.878 / 0.996),
undergraduate / graduate tuition (0.903 / 0.986), "Can the reviewer see the author's
name?" against the reverse (0.976 / 0.994); others were held back by the retrieval
threshold alone, the verifier serving them: generic / brand-name drugs (0.840 / 0.996),
an interviewer's question against a candidate's (0.741 / 0.993). Entries as in
``validators.contrast_kinds``; the shipper and the consignee of a parcel are members of
its ``parcel`` set (sender / recipient).

A category set is ``UNORDERED`` (``CATEGORY_NAMES``): "generic and brand-name drugs"
and "brand-name drugs and generics" name the same two, and no order means who acts.
Words that are mostly something else are anchored: "generic" only before a drug's word
or as "generics" (a generic error is none), "graduate" only before a student, school,
programme or degree ("after I graduate" is none), "hourly" only before a worker, a
wage or a job (an hourly rate for parking is none). 小时工 is no member: it is inside
24小时工作.
"""

from __future__ import annotations

_DRUG = r"(?:drugs?|medications?|medicines?|meds|versions?|equivalents?|prescriptions?|pills?)"
_STUDY = (
    r"(?:students?|school|programs?|programmes?|degrees?|studies|courses?|admissions?"
    r"|applicants?|tuition|housing|scholarships?)"
)
_STAFF = r"(?:employees?|workers?|staff|wages?|pay|jobs?|positions?|roles?|contractors?)"

#: Roles of a review or a hiring (the module docstring); order is read, as for parties.
ROLE_SETS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "review",
        (
            ("reviewer", r"(?:peer\s)?reviewers?|referees?", "审稿人|评审人|审稿专家"),
            ("author", r"authors?", "作者"),
        ),
    ),
    (
        "hiring",
        (
            (
                "interviewer",
                r"interviewers?|recruiters?|hiring\smanagers?",
                "面试官|招聘方|招聘人员",
            ),
            (
                "candidate",
                r"candidates?|applicants?|interviewees?|job\s(?:seekers?|hunters?)",
                "求职者|应聘者|候选人|面试者",
            ),
        ),
    ),
)

#: Sibling categories (the module docstring); no order is read.
CATEGORY_SETS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "drug_kind",
        (
            ("generic", rf"generic\s(?:{_DRUG}|names?)|generics", "仿制药"),
            ("brand", rf"brand[\s-]name(?:\s{_DRUG})?|name[\s-]brand\s{_DRUG}", "原研药|品牌药"),
        ),
    ),
    (
        "degree",
        (
            ("undergraduate", r"undergrad(?:uate)?s?", "本科生|本科"),
            (
                "graduate",
                rf"(?:post)?grad(?:uate)?\s{_STUDY}|postgrad(?:uate)?s",
                "研究生",
            ),
            ("master", rf"master['’]?s\s(?:{_STUDY}|level)", "硕士"),
            ("doctoral", r"ph\.?\s?d\.?s?|doctoral|doctorates?", "博士"),
        ),
    ),
    (
        "pay_basis",
        (
            ("hourly", rf"hourly\s{_STAFF}|paid\sby\sthe\shour", "时薪|钟点工"),
            ("salaried", rf"salaried(?:\s{_STAFF})?", "月薪|年薪"),
        ),
    ),
)

#: The category sets' names: ``validators.contrast_scopes.UNORDERED`` holds them.
CATEGORY_NAMES = tuple(name for name, _ in CATEGORY_SETS)
