"""The corpus vocabulary: real and made-up words in Zipf order, and Chinese words built from common characters."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

LATIN_SIZE = 4000
CHINESE_SIZE = 1500
ZIPF_S = 1.05
TOPICS, TOPIC_WORDS, TOPIC_S, POPULARITY_S = 60, 10, 0.8, 1.2


def _words(text: str) -> tuple[str, ...]:
    """The space-separated words of a text."""
    return tuple(text.split())


# The most frequent words of any English diary: never used as query words.
FUNCTION_WORDS = _words(
    "the to and a of in is for on it with that this at be as was we not but from by are or i have an after "
    "now when so all if then still again need use new one our"
)

REAL_WORDS = _words(
    "deploy staging database port migration test pytest build release branch merge commit review config server "
    "client socket cache index query latency memory timeout error fix bug crash log user session token api "
    "endpoint schema table column backup restore docker container image cluster node disk network proxy nginx "
    "certificate dns ssh secret vault password login oauth email invoice customer meeting call plan roadmap "
    "sprint ticket issue feature refactor module package dependency upgrade version python rust typescript react "
    "frontend backend layout mobile android payment stripe webhook queue worker cron job retry alert monitor "
    "grafana metric dashboard postgres sqlite redis kafka bucket upload download file folder path permission "
    "linux kernel driver laptop printer coffee tea lunch dinner weekend holiday flight hotel train doctor dentist "
    "birthday gift book article paper idea draft design diagram spec contract budget salary tax rent bank loan "
    "garden bike running gym yoga music guitar movie podcast recipe bread soup oolong kettle invoice alembic "
    "sqlalchemy models handler router middleware benchmark profile snapshot rollback hotfix pipeline runner "
    "artifact registry terraform ansible systemd journal watchdog inotify editor vim emacs keyboard monitor "
    "battery charger router wifi vpn firewall storage quota billing refund discount shipping warehouse supplier "
    "contractor interview onboarding feedback retro standup demo launch outage incident postmortem runbook"
)

CHINESE_CHARS = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多"
    "天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身"
    "些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第"
    "门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目"
    "华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台"
    "象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资"
    "队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语"
    "英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导"
    "影失拿网香似专石若弟谁校读志飞观争究包组造落视济喜离虽坏兴切茶饮料署库器试配置缓存索引查询错误修复志户话"
)
CHINESE_REAL = _words("乌龙茶 数据库 服务器 部署 测试 缓存 索引 配置 日志 用户 会话 接口 内存 错误 修复 饮料 最喜欢")

_ONSETS = _words("b c d f g h j k l m n p r s t v w z br ch cl dr fr gr kr pl pr sh st th tr")
_VOWELS = _words("a e i o u a e i o ai ea ou io")
_CODAS = ["", "", "", "n", "r", "l", "s", "t", "x", "m", "nd", "rk", "st"]


@dataclass(frozen=True)
class Vocabulary:
    """Words in rank order with their cumulative Zipf weights, ready for random.choices."""

    words: tuple[str, ...]
    cum_weights: tuple[float, ...]

    def draw(self, rng: random.Random, k: int) -> list[str]:
        """k words drawn independently by Zipf frequency."""
        return rng.choices(self.words, cum_weights=self.cum_weights, k=k)


def zipf(words: list[str], s: float = ZIPF_S) -> Vocabulary:
    """Zipf weights 1/rank^s over words already in rank order."""
    weights = (1 / rank**s for rank in range(1, len(words) + 1))
    return Vocabulary(tuple(words), tuple(itertools.accumulate(weights)))


def _made_up_word(rng: random.Random) -> str:
    """A pronounceable word of one to three syllables."""
    syllables = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(1, 3))]
    return "".join(syllables) + rng.choice(_CODAS)


def latin_vocabulary(rng: random.Random) -> Vocabulary:
    """Function words first, then real and made-up words shuffled together across the ranks."""
    seen = set(FUNCTION_WORDS)
    content = [w for w in dict.fromkeys(REAL_WORDS) if w not in seen]
    seen.update(content)
    while len(seen) < LATIN_SIZE:
        word = _made_up_word(rng)
        if word not in seen:
            seen.add(word)
            content.append(word)
    rng.shuffle(content)
    return zipf([*FUNCTION_WORDS, *content])


def chinese_vocabulary(rng: random.Random) -> Vocabulary:
    """Chinese words of one to three characters from common characters, in random rank order."""
    chars = list(dict.fromkeys(CHINESE_CHARS))
    words = dict.fromkeys(CHINESE_REAL)
    while len(words) < CHINESE_SIZE:
        size = rng.choices((1, 2, 3), weights=(15, 60, 25))[0]
        words["".join(rng.choices(chars, k=size))] = None
    ranked = list(words)
    rng.shuffle(ranked)
    return zipf(ranked)


def topics(rng: random.Random, latin: Vocabulary) -> list[Vocabulary]:
    """Topics, most popular first, each a few content words Zipf-weighted within it.

    Entries about one topic share its words, so words co-occur as they do in a
    real diary and a query of two common words has many hits.
    """
    content = [w for w in latin.words if w not in FUNCTION_WORDS]
    return [zipf(rng.sample(content, TOPIC_WORDS), TOPIC_S) for _ in range(TOPICS)]


def topic_popularity() -> Vocabulary:
    """Topic indices (as strings) in Zipf order of popularity."""
    return zipf([str(i) for i in range(TOPICS)], POPULARITY_S)
