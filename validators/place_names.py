"""The place tables ``validators.places`` reads: every spelling of a place to its id,
and the places each one lies in.

Ids are lower-case English names (``new york``, ``hong kong``), one per place whatever
the spelling or the language: "US", "U.S.", "USA", "United States" and 美国 are all
``us``. Cities are listed only where the word is rarely anything else in a question
("phoenix", "nice", "reading", "mobile", "bath", "york", "victoria", "lincoln" and
"washington" are left out), and in lower case too, since CLINC150's questions are.
``CONTAINERS`` says what a city, state or province lies in, so that "Paris, France"
names what "Paris" names (the country adds nothing when its city is named).
"""

from __future__ import annotations

COUNTRIES = """
argentina australia austria bangladesh belgium brazil bulgaria canada chile china colombia
croatia cuba czechia denmark egypt estonia ethiopia finland france germany ghana greece
hungary iceland india indonesia iran iraq ireland israel italy jamaica japan kenya latvia
lebanon lithuania luxembourg malaysia mexico morocco nepal netherlands nigeria norway pakistan
peru philippines poland portugal qatar romania russia serbia singapore slovakia slovenia
spain sweden switzerland taiwan thailand turkey ukraine vietnam zimbabwe macau
cyprus malta monaco cambodia mongolia myanmar laos kuwait oman afghanistan kazakhstan
uzbekistan algeria tunisia libya sudan uganda tanzania rwanda senegal cameroon angola
mozambique zambia botswana namibia madagascar venezuela ecuador bolivia paraguay uruguay
panama guatemala honduras nicaragua haiti bahamas barbados fiji belarus moldova armenia
azerbaijan albania montenegro kosovo el_salvador north_macedonia bosnia
england scotland wales
new_zealand south_africa saudi_arabia hong_kong northern_ireland south_korea north_korea
sri_lanka costa_rica puerto_rico czech_republic dominican_republic
"""
US_STATES = """
alabama alaska arizona arkansas california colorado connecticut delaware florida georgia
hawaii idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts
michigan minnesota mississippi missouri montana nebraska nevada ohio oklahoma oregon
pennsylvania tennessee texas utah vermont virginia wisconsin wyoming
new_hampshire new_jersey new_mexico new_york north_carolina north_dakota south_carolina
south_dakota rhode_island west_virginia
"""
PROVINCES = """
ontario quebec alberta manitoba saskatchewan nova_scotia british_columbia new_brunswick
newfoundland
"""
#: city -> the places it lies in (its state or province, and its country)
CITIES: dict[str, tuple[str, ...]] = {
    **{c: ("uk", "england") for c in ("london", "manchester", "liverpool", "birmingham",
                                      "leeds", "bristol", "oxford", "cambridge")},
    "edinburgh": ("uk", "scotland"), "glasgow": ("uk", "scotland"), "cardiff": ("uk", "wales"),
    "belfast": ("uk", "northern ireland"), "dublin": ("ireland",),
    "paris": ("france",), "lyon": ("france",), "marseille": ("france",),
    "berlin": ("germany",), "munich": ("germany",), "frankfurt": ("germany",),
    "hamburg": ("germany",), "madrid": ("spain",), "barcelona": ("spain",),
    "rome": ("italy",), "milan": ("italy",), "venice": ("italy",), "florence": ("italy",),
    "amsterdam": ("netherlands",), "brussels": ("belgium",), "vienna": ("austria",),
    "zurich": ("switzerland",), "geneva": ("switzerland",), "lisbon": ("portugal",),
    "prague": ("czechia",), "budapest": ("hungary",), "warsaw": ("poland",),
    "stockholm": ("sweden",), "oslo": ("norway",), "copenhagen": ("denmark",),
    "helsinki": ("finland",), "athens": ("greece",), "istanbul": ("turkey",),
    "moscow": ("russia",), "dubai": ("uae",), "abu dhabi": ("uae",), "tel aviv": ("israel",),
    "cairo": ("egypt",), "nairobi": ("kenya",), "lagos": ("nigeria",),
    "cape town": ("south africa",), "johannesburg": ("south africa",),
    "tokyo": ("japan",), "osaka": ("japan",), "kyoto": ("japan",), "seoul": ("south korea",),
    "beijing": ("china",), "shanghai": ("china",), "shenzhen": ("china",),
    "guangzhou": ("china",), "hangzhou": ("china",), "chengdu": ("china",),
    "taipei": ("taiwan",), "bangkok": ("thailand",), "manila": ("philippines",),
    "jakarta": ("indonesia",), "bali": ("indonesia",), "kuala lumpur": ("malaysia",),
    "mumbai": ("india",), "delhi": ("india",), "new delhi": ("india",),
    "bangalore": ("india",), "sydney": ("australia",), "melbourne": ("australia",),
    "brisbane": ("australia",), "perth": ("australia",), "auckland": ("new zealand",),
    "toronto": ("canada", "ontario"), "ottawa": ("canada", "ontario"),
    "montreal": ("canada", "quebec"), "vancouver": ("canada", "british columbia"),
    "calgary": ("canada", "alberta"), "mexico city": ("mexico",), "cancun": ("mexico",),
    "sao paulo": ("brazil",), "rio de janeiro": ("brazil",), "buenos aires": ("argentina",),
    "new york city": ("us",), "nyc": ("us",),
    "los angeles": ("us", "california"), "san francisco": ("us", "california"),
    "san diego": ("us", "california"), "chicago": ("us", "illinois"),
    "boston": ("us", "massachusetts"), "seattle": ("us", "washington state"),
    "miami": ("us", "florida"), "orlando": ("us", "florida"), "dallas": ("us", "texas"),
    "houston": ("us", "texas"), "austin": ("us", "texas"), "atlanta": ("us", "georgia"),
    "denver": ("us", "colorado"), "las vegas": ("us", "nevada"),
    "philadelphia": ("us", "pennsylvania"), "new orleans": ("us", "louisiana"),
    "honolulu": ("us", "hawaii"), "washington dc": ("us",), "washington d.c.": ("us",),
}  # fmt: skip
#: Other spellings of one place, lower case, to its id.
SYNONYMS = {
    "united states": "us",
    "united states of america": "us",  # not "america": South / Latin America
    "united kingdom": "uk",
    "great britain": "uk",
    "britain": "uk",
    "holland": "netherlands",
    "the netherlands": "netherlands",
    "korea": "south korea",
    "czech republic": "czechia",
    "washington state": "washington state",
    # the city and the state are one place to a question ("restaurants in new york")
    "new york city": "new york",
    "nyc": "new york",
    "new delhi": "delhi",
    "washington d.c.": "washington dc",
}
#: Acronyms: "US" in capitals only (the pronoun), the others in any case
ACRONYMS = {"usa": "us", "u.s.": "us", "u.s.a.": "us", "uk": "uk", "u.k.": "uk",
            "eu": "eu", "uae": "uae"}  # fmt: skip
#: Chinese names (the pattern tries the longest first: 印度尼西亚 before 印度, 北爱尔兰
#: before 爱尔兰).
ZH_PLACES = {
    "中国": "china", "美国": "us", "英国": "uk", "日本": "japan", "韩国": "south korea",
    "德国": "germany", "法国": "france", "加拿大": "canada", "澳大利亚": "australia",
    "澳洲": "australia", "新西兰": "new zealand", "新加坡": "singapore", "香港": "hong kong",
    "澳门": "macau", "台湾": "taiwan", "俄罗斯": "russia", "意大利": "italy",
    "西班牙": "spain", "葡萄牙": "portugal", "荷兰": "netherlands", "瑞士": "switzerland",
    "瑞典": "sweden", "印度尼西亚": "indonesia", "印尼": "indonesia", "印度": "india",
    "泰国": "thailand", "越南": "vietnam", "马来西亚": "malaysia", "菲律宾": "philippines",
    "墨西哥": "mexico", "巴西": "brazil", "欧盟": "eu", "阿联酋": "uae", "迪拜": "dubai",
    "北京": "beijing", "上海": "shanghai", "广州": "guangzhou", "深圳": "shenzhen",
    "杭州": "hangzhou", "成都": "chengdu", "重庆": "chongqing", "天津": "tianjin",
    "南京": "nanjing", "武汉": "wuhan", "西安": "xian", "苏州": "suzhou",
    "伦敦": "london", "巴黎": "paris", "东京": "tokyo", "首尔": "seoul", "纽约": "new york",
    "洛杉矶": "los angeles", "旧金山": "san francisco", "悉尼": "sydney", "多伦多": "toronto",
    "温哥华": "vancouver", "台北": "taipei", "曼谷": "bangkok",
    "广东": "guangdong", "浙江": "zhejiang", "江苏": "jiangsu", "四川": "sichuan",
    "福建": "fujian", "山东": "shandong", "湖北": "hubei", "湖南": "hunan", "河南": "henan",
    "河北": "hebei", "海南": "hainan", "云南": "yunnan",
    "英格兰": "england", "苏格兰": "scotland", "威尔士": "wales", "北爱尔兰": "northern ireland",
    "爱尔兰": "ireland", "朝鲜": "north korea", "以色列": "israel", "埃及": "egypt",
    "土耳其": "turkey", "希腊": "greece", "比利时": "belgium", "奥地利": "austria",
    "丹麦": "denmark", "挪威": "norway", "芬兰": "finland", "波兰": "poland",
    "乌克兰": "ukraine", "阿根廷": "argentina", "智利": "chile", "南非": "south africa",
}  # fmt: skip
_ZH_CITIES = {
    "chongqing": ("china",), "tianjin": ("china",), "nanjing": ("china", "jiangsu"),
    "wuhan": ("china", "hubei"), "xian": ("china",), "suzhou": ("china", "jiangsu"),
}  # fmt: skip
_PROVINCE_IDS = ("guangdong", "zhejiang", "jiangsu", "sichuan", "fujian", "shandong", "hubei",
                 "hunan", "henan", "hebei", "hainan", "yunnan")  # fmt: skip


def _words(block: str) -> list[str]:
    return [w.replace("_", " ") for w in block.split()]


#: place id -> the ids of the places it lies in
CONTAINERS: dict[str, tuple[str, ...]] = {
    **{state: ("us",) for state in _words(US_STATES)},
    "washington state": ("us",),
    **{province: ("canada",) for province in _words(PROVINCES)},
    **{nation: ("uk",) for nation in ("england", "scotland", "wales", "northern ireland")},
    **{province: ("china",) for province in _PROVINCE_IDS},
    "guangzhou": ("china", "guangdong"),
    "shenzhen": ("china", "guangdong"),
    "hangzhou": ("china", "zhejiang"),
    "chengdu": ("china", "sichuan"),
    **_ZH_CITIES,
    **{city: containers for city, containers in CITIES.items() if city not in SYNONYMS},
}
#: ids of cities (recorded as names too when capitalised: validators.names)
CITY_IDS = frozenset(c for c in CITIES if c not in SYNONYMS) | frozenset(_ZH_CITIES)
#: English spellings, longest first ("new york city" before "new york")
EN_NAMES = sorted(
    set(_words(COUNTRIES))
    | set(_words(US_STATES))
    | set(_words(PROVINCES))
    | set(CITIES)
    | set(SYNONYMS),
    key=len,
    reverse=True,
)
ALL_IDS = (
    frozenset(SYNONYMS.get(n, n) for n in EN_NAMES)
    | frozenset(ACRONYMS.values())
    | frozenset(ZH_PLACES.values())
)
#: Nationalities ("Do Americans need a visa for Japan?" / "Do Canadians …"): demonym ->
#: the id of its country. Left out where the word is mostly something else or names a
#: region or a people across countries ("Turkish" is kept, "Korean" is South Korea's).
DEMONYMS = {
    "american": "us", "americans": "us", "british": "uk", "brit": "uk", "brits": "uk",
    "english": "england", "scottish": "scotland", "welsh": "wales", "irish": "ireland",
    "canadian": "canada", "canadians": "canada", "mexican": "mexico", "mexicans": "mexico",
    "chinese": "china", "japanese": "japan", "korean": "south korea", "koreans": "south korea",
    "indian": "india", "indians": "india", "australian": "australia",
    "australians": "australia", "german": "germany", "germans": "germany",
    "french": "france", "italian": "italy", "italians": "italy", "spanish": "spain",
    "portuguese": "portugal", "dutch": "netherlands", "swiss": "switzerland",
    "swedish": "sweden", "norwegian": "norway", "danish": "denmark", "finnish": "finland",
    "russian": "russia", "russians": "russia", "ukrainian": "ukraine",
    "turkish": "turkey", "greek": "greece", "israeli": "israel", "israelis": "israel",
    "brazilian": "brazil", "brazilians": "brazil", "argentinian": "argentina",
    "filipino": "philippines", "filipinos": "philippines", "vietnamese": "vietnam",
    "thai": "thailand", "indonesian": "indonesia", "malaysian": "malaysia",
    "singaporean": "singapore", "pakistani": "pakistan", "nigerian": "nigeria",
    "egyptian": "egypt", "south african": "south africa", "south africans": "south africa",
    "new zealander": "new zealand", "new zealanders": "new zealand",
    "european": "eu", "europeans": "eu",
}  # fmt: skip
