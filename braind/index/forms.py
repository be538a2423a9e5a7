"""English irregular word forms and the base form they are indexed as, so that `went` finds `go`.

Snowball strips suffixes (`painted` → `paint`), but an irregular verb changes
its vowels (`go`, `went`, `gone`) and an irregular plural its body (`child`,
`children`). A question is usually asked in the present ("When did she go
camping?") about what was told in the past ("We went camping"), so both sides
are read as the base form before stemming. Forms that are also common words of
their own (`rose`, `bound`, `ground`, `wound`, `bit`, `shot`) are left alone,
and so is `won`, which is also the first half of `won't` once the apostrophe
splits it.
"""

from __future__ import annotations

_FORMS = """
go went gone | make made | take took taken | come came | see saw seen | get got gotten | give gave given
know knew known | think thought | tell told | become became | begin began begun | bring brought | buy bought
build built | catch caught | choose chose chosen | draw drew drawn | drink drank drunk | drive drove driven
eat ate eaten | fall fell fallen | feel felt | fight fought | find found | fly flew flown | forget forgot forgotten
grow grew grown | hear heard | hold held | keep kept | learn learnt | leave left | lose lost | mean meant
meet met | pay paid | run ran | ride rode ridden | ring rang rung | say said | sell sold | send sent
sing sang sung | sit sat | sleep slept | speak spoke spoken | spend spent | stand stood | steal stole stolen
swim swam swum | teach taught | throw threw thrown | understand understood | wake woke woken | wear wore worn
write wrote written | break broke broken | hide hid hidden | shake shook shaken | lead led
feed fed | flee fled | deal dealt | dig dug | hang hung | strike struck | stick stuck
sweep swept | weep wept | bend bent | blow blew blown | bleed bled | freeze froze frozen | seek sought
sink sank sunk | spin spun | swear swore sworn | tear tore torn | overcome overcame | forgive forgave forgiven
arise arose arisen | bite bitten | light lit | lend lent | sting stung | creep crept | kneel knelt
child children | man men | woman women | person people | mouse mice | foot feet | tooth teeth | goose geese
"""


def _table() -> dict[str, str]:
    """Each irregular form and its base form."""
    table: dict[str, str] = {}
    for group in _FORMS.replace("\n", "|").split("|"):
        if not group.strip():
            continue
        base, *forms = group.split()
        table.update((form, base) for form in forms)
    return table


BASE_FORMS = _table()  # English only: another language's words are never looked up in it
