"""Deliberate Tool Mode's built-in triggers: what in a user's message shows they want a tool.

Patterns per trigger, in English, Portuguese, Spanish and Russian, all checked on every message (a
bilingual chat works in both languages). They read the message folded by `fold` (lower-cased,
accents of Latin letters removed, curly apostrophes straightened), so "lembra-me amanhã" and
"lembra-me amanha" read the same; Cyrillic keeps its й and ё.

Each trigger is a list of rules; a rule is a pattern and, for weak wording, a second pattern that
must match somewhere in the message too (a time for "ping me", a link for "read"). They lean towards
requests ("remind me", "set an alarm", "search the web for") over narration ("she remembered"), so a
roleplay paragraph declares nothing: a false trigger costs the declarations' tokens, a missed one
costs the tool.

Every pattern is ours and fixed; gaps between words are bounded ({0,3} words), so matching stays
linear in the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    needs: re.Pattern[str] | None = None  # must match somewhere in the message too


def _c(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives))


def _rules(*patterns: str, needs: re.Pattern[str] | None = None) -> tuple[Rule, ...]:
    return tuple(Rule(re.compile(p), needs) for p in patterns)


# Up to three words between a verb and its object: "read the attached file", "прочитай этот файл".
_GAP = r"(?:\s+\S+){0,3}\s+"

# A time or a repetition, per language.
TIME = _c(
    # English
    r"(?<!\w)(?:tomorrow|tonight|today|noon|midnight|this\s+(?:morning|afternoon|evening|weekend)"
    r"|next\s+(?:week|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?:on\s+)?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|in\s+(?:\d+|an?|one|two|three|five|ten|fifteen|twenty|thirty|a\s+few|half\s+an?|a\s+couple\s+of)\s*"
    r"(?:min(?:ute)?s?|hours?|hrs?|days?|weeks?|months?|sec(?:ond)?s?)"
    r"|at\s+\d{1,2}(?::\d{2})?|\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\d{1,2}\s*o'?clock"
    r"|every\s+(?:day|week|hour|morning|evening|night|\d+\s+(?:hours?|days?|minutes?)))(?!\w)",
    # Portuguese
    r"(?<!\w)(?:amanha|depois\s+de\s+amanha|hoje|esta\s+(?:noite|tarde|manha)|de\s+manha|a\s+noite"
    r"|as?\s+\d{1,2}(?:[:h]\d{2})?h?|\d{1,2}h(?:\d{2})?"
    r"|(?:daqui\s+a|em|dentro\s+de)\s+(?:\d+|um|uma|dois|duas|tres|cinco|dez|meia)\s*"
    r"(?:min(?:uto)?s?|horas?|h|dias?|semanas?|segundos?)"
    r"|(?:na\s+)?proxima\s+semana|semana\s+que\s+vem"
    r"|(?:na\s+)?(?:segunda|terca|quarta|quinta|sexta)-feira|(?:no\s+)?(?:sabado|domingo)"
    r"|todos\s+os\s+dias|todo\s+dia|a\s+cada\s+\d+\s*(?:horas?|dias?|min(?:uto)?s?))(?!\w)",
    # Spanish
    r"(?<!\w)(?:manana|pasado\s+manana|hoy|esta\s+(?:noche|tarde|manana)|a\s+las?\s+\d{1,2}(?::\d{2})?"
    r"|(?:en|dentro\s+de)\s+(?:\d+|un|una|dos|cinco|diez|media)\s*(?:min(?:uto)?s?|horas?|dias?|semanas?|segundos?)"
    r"|(?:la\s+)?proxima\s+semana|semana\s+que\s+viene"
    r"|(?:el\s+)?(?:lunes|martes|miercoles|jueves|viernes|sabado|domingo)"
    r"|todos\s+los\s+dias|cada\s+(?:dia|\d+\s+(?:horas?|dias?|min(?:uto)?s?)))(?!\w)",
    # Russian
    r"(?<!\w)(?:завтра|послезавтра|сегодня|вечером|утром|дн[её]м|ночью"
    r"|через\s+(?:\d+|час|минуту|пять|десять|полчаса|неделю|день|пару)"
    r"|в\s+\d{1,2}(?::\d{2})?|на\s+следующей\s+неделе"
    r"|в\s+(?:понедельник|вторник|среду|четверг|пятницу|субботу|воскресенье)"
    r"|каждый\s+(?:день|час|вечер)|каждое\s+утро|каждые\s+\d+)(?!\w)",
)
URL = re.compile(r"(?:https?://|www\.)\S+")
_READ_WORDS = _c(
    r"\b(?:read|summari[sz]e|summary|open|check|look\s+at|visit|fetch|tl;?dr|go\s+to|what\s+does\s+(?:it|this|that)\s+say)\b",
    r"\b(?:le|leia|ler|resum[aeo]|resumir|abr[ae]|abrir|veja|olh[ae]|acess[ae]|confir[ae])\b",
    r"\b(?:lee|leer|resume|resumen|resumir|abre|abrir|mira|revisa|visita)\b",
    r"\b(?:прочитай|прочти|перескажи|открой|посмотри|зайди|кратко|что\s+там)\b",
)

TRIGGERS: dict[str, tuple[Rule, ...]] = {
    "task": (
        *_rules(
            r"\bremind\s+(?:me|us)\b(?!\s+of\b)",
            r"\b(?:set|create|schedule|make|add|start|put)\s+(?:up\s+)?(?:(?:a|an|another|the|my|one|\d+)\s+)?"
            r"(?:\w+\s+)?(?:reminder|timer|alarm|task)s?\b",
            r"\b(?:cancel|delete|remove|change|move|update|reschedule|snooze|edit|stop|clear)\s+"
            r"(?:(?:the|my|that|this|all|your)\s+)?(?:\w+\s+)?(?:reminder|timer|alarm|task)s?\b",
            r"\b(?:my|any|the)\s+reminders\b",
            # Portuguese: "lembra-me de comprar" (an infinitive after it), not "me lembra de quando"
            r"\b(?:lembr[ae]-me|me\s+lembr[ae]r?)\s+de\s+\w+(?:ar|er|ir)\b",
            r"\b(?:cri[ae]r?|marc[ae]r?|agend[ae]r?|defin[ae]|definir|poe|por|coloc[ae]r?|faz|fazer|adicion[ae]r?)\s+"
            r"(?:(?:um|uma|outro|outra|o|a|meu|minha)\s+)?(?:\w+\s+)?"
            r"(?:lembretes?|alarmes?|despertador|timer|temporizador|tarefas?)\b",
            r"\b(?:cancel[ae]r?|apag[ae]r?|remov[ae]r?|mud[ae]r?|alter[ae]r?|adi[ae]r?)\s+"
            r"(?:(?:o|a|os|as|meu|minha|meus|minhas|esse|essa|este|esta)\s+)?(?:\w+\s+)?"
            r"(?:lembretes?|alarmes?|despertador|tarefas?)\b",
            # Spanish
            r"\brecuerdame\s+(?:\w+(?:ar|er|ir)\b|que\s+(?:tengo|debo|hay)\b)",
            r"\b(?:crea|crear|pon|poner|ponme|programa|programar|configura|agenda|agendar|anade|haz)\s+"
            r"(?:(?:un|una|otro|otra|el|la|mi)\s+)?(?:\w+\s+)?"
            r"(?:recordatorios?|alarmas?|temporizador(?:es)?|tareas?)\b",
            r"\b(?:cancela|cancelar|borra|borrar|elimina|eliminar|cambia|cambiar|mueve|pospon|posponer)\s+"
            r"(?:(?:el|la|los|las|mi|mis|ese|esa|este|esta)\s+)?(?:\w+\s+)?"
            r"(?:recordatorios?|alarmas?|temporizador(?:es)?|tareas?)\b",
            # Russian
            r"\bнапомни(?:те)?\s+(?:мне|нам)\b",
            r"\b(?:поставь|создай|установи|сделай|заведи|добавь)(?:те)?\s+(?:\w+\s+)?"
            r"(?:напоминани[ея]|будильник|таймер|задач[уи])\b",
            r"\b(?:отмени|удали|измени|перенеси|отложи)(?:те)?\s+(?:\w+\s+)?(?:напоминани[ея]|будильник|таймер|задач[уи])\b",
        ),
        # Weaker wording counts with a time: "ping me at 9", "lembra-me amanhã", "напомни завтра".
        *_rules(
            r"\b(?:ping|notify|nudge|poke|alert)\s+(?:me|us)\b",
            r"\bwake\s+me(?:\s+up)?\b",
            r"\breminders?\b",
            r"\b(?:lembr[ae]-me|me\s+lembr[ae]r?|me\s+avis[ae]|avis[ae]-me|me\s+acord[ae]|acord[ae]-me|me\s+cham[ae])\b",
            r"\blembretes?\b",
            r"\b(?:recuerdame|recordame|me\s+recuerdas|avisame|me\s+avisas|despiertame|me\s+despiertas)\b",
            r"\brecordatorios?\b",
            r"\bнапомни(?:те)?\b",
            r"\b(?:разбуди|предупреди)(?:те)?\s+меня\b",
            r"\bнапоминани[ея]\b",
            needs=TIME,
        ),
    ),
    "web_search": _rules(
        r"\b(?:search|look)\s+(?:(?:it|that|this)\s+)?(?:up\s+)?(?:online|on\s+(?:the\s+)?(?:web|internet|net|google))\b",
        r"\bsearch\s+(?:the\s+)?(?:web|internet|net)\b",
        r"\b(?:web|internet|online|google)\s+search\b",
        r"\b(?:google|bing)\s+(?:it|that|this|for|what|who|how|when|where)\b",
        r"\blook\s+(?:it|that|this)\s+up\b",
        r"\blook\s+up\s+(?:what|who|how|when|where|the\s+latest|the\s+news|information|info)\b",
        r"\b(?:latest|recent|current|today'?s|breaking)\s+(?:news|headlines|updates?|version|release|price|score|results?|weather)\b",
        r"\bwhat'?s\s+the\s+(?:weather|news)\b",
        r"\bcan\s+you\s+(?:search|look\s+up|find\s+out|check\s+online)\b",
        # Portuguese
        r"\b(?:pesquis[ae]r?|procur[ae]r?|busc[ae]r?)\s+(?:isso\s+|isto\s+)?(?:na\s+(?:internet|web|net)|no\s+google|online)\b",
        r"\b(?:pesquis[ae]|googl[ae])\s+(?:isso|sobre|por)\b",
        r"\b(?:ultimas|recentes)\s+noticias\b|\bnoticias\s+(?:de\s+hoje|sobre)\b|\bprevisao\s+do\s+tempo\b",
        # Spanish
        r"\b(?:busca|buscar|investiga|googlea)\s+(?:eso\s+|esto\s+)?(?:en\s+(?:internet|la\s+web|google|linea)|online)\b",
        r"\b(?:busca|googlea)\s+(?:eso|esto|sobre)\b",
        r"\bultimas\s+noticias\b|\bnoticias\s+(?:de\s+hoy|sobre)\b|\bpronostico\s+del\s+tiempo\b",
        # Russian
        r"\b(?:погугли|загугли|пробей\s+в\s+интернете)\b",
        r"\b(?:найди|поищи|посмотри|проверь)" + _GAP + r"(?:в\s+(?:интернете|сети|гугле)|онлайн)\b",
        r"\bпоследние\s+новости\b|\bновости\s+(?:о|про|сегодня)\b|\bпрогноз\s+погоды\b",
    ),
    "url_fetch": (Rule(URL, _READ_WORDS),),
    "memory": _rules(
        r"(?:^|[.!?\n][^\S\n]*|\b(?:please|pls|plz|can\s+you|could\s+you|will\s+you|would\s+you|you\s+should|"
        r"make\s+sure\s+(?:to|you)|try\s+to|i\s+want\s+you\s+to|and)\s+)(?:remember|memori[sz]e)\b(?!\s+when\b)",
        r"\bdon'?t\s+forget\s+(?:that|this|my|about|i)\b",
        r"\b(?:forget|delete|erase)\s+(?:what\s+i\s+(?:said|told\s+you)|that\s+i\b|(?:that|this)\s+(?:memory|fact))",
        r"\b(?:save|store|note\s+down|write\s+down|jot\s+down)\s+(?:this|that)\b(?!\s+for\s+later)",
        r"\b(?:add|put)\s+(?:this|that|it)\s+(?:to|in|into)\s+(?:your\s+)?memor(?:y|ies)\b",
        r"\b(?:update|check|clear|edit|wipe|review)\s+(?:your|ur|the)\s+(?:long[- ]term\s+)?memor(?:y|ies)\b",
        r"\bwhat\s+do\s+you\s+(?:remember|know)\s+about\s+me\b",
        # Portuguese
        r"\b(?:lembre-se|lembra-te|lembre-te|memoriz[ae])\b",
        r"\b(?:guard[ae]|salv[ae]|anot[ae]|registr[ae])\s+(?:isso|isto|essa\s+informacao|na\s+(?:sua\s+|tua\s+)?memoria)\b",
        r"\bnao\s+(?:se\s+)?esque(?:ca|cas|ce)\s+(?:de|que|disso|isso)\b",
        r"\besque(?:ca|ce)\s+(?:isso|isto|o\s+que\s+eu\s+(?:disse|falei)|que\s+eu)\b",
        r"\b(?:atualiz[ae]|limp[ae]|revis[ae])\s+(?:a\s+)?(?:sua|tua)\s+memoria\b",
        # Spanish
        r"\b(?:acuerdate|memoriza|recuerda\s+(?:que|esto|eso))\b",
        r"\b(?:guarda|apunta|anota|registra)\s+(?:esto|eso|en\s+tu\s+memoria)\b",
        r"\bno\s+(?:te\s+)?olvides\s+(?:de|que|esto|eso)\b",
        r"\bolvida\s+(?:eso|esto|lo\s+que\s+(?:te\s+)?dije|que\s+(?:te\s+)?dije)\b",
        r"\b(?:actualiza|limpia|revisa)\s+tu\s+memoria\b",
        # Russian
        r"\bзапомни(?:те)?\b",
        r"\bне\s+забудь(?:те)?,?\s+(?:что|это|про|о)\b",
        r"\bзабудь(?:те)?,?\s+(?:это|что|про|о|всё|все)\b",
        r"\bсохрани(?:те)?\s+(?:это|в\s+памят)",
        r"\b(?:обнови|очисти|проверь)(?:те)?\s+(?:свою\s+|твою\s+)?памят",
    ),
    "document": _rules(
        r"\b(?:read|open|summari[sz]e|look\s+at|check|analy[sz]e|go\s+through|review|skim)"
        + _GAP
        + r"(?:file|attachment|document|doc|pdf|txt|upload)s?\b",
        r"\b(?:attached|uploaded)\s+(?:a\s+|the\s+)?(?:file|document|pdf|text\s+file)\b",
        r"\b(?:in|from)\s+the\s+(?:attachment|pdf|attached\s+file)\b",
        r"\b(?:le|leia|ler|abr[ae]|abrir|resum[aei]|resumir|analis[ae]r?|veja|ver|olh[ae])"
        + _GAP
        + r"(?:arquivos?|ficheiros?|anexos?|documentos?|pdf)\b",
        r"\bem\s+anexo\b|\b(?:o|no|este|esse|do)\s+anexo\b",
        r"\b(?:lee|leer|abre|abrir|resume|resumir|analiza|analizar|revisa|revisar|mira|mirar)"
        + _GAP
        + r"(?:archivos?|ficheros?|adjuntos?|documentos?|pdf)\b",
        r"\b(?:el|este|ese|del)\s+adjunto\b",
        r"\b(?:прочитай|прочти|открой|перескажи|резюмируй|посмотри|проанализируй|изучи|глянь)"
        + _GAP
        + r"(?:файл\w*|вложени\w*|документ\w*|пдф|pdf)",
        r"\bво\s+вложении\b",
    ),
    "manage_message": _rules(
        r"\b(?:edit|delete|remove|change|fix|rewrite|unsend|erase|correct|retract|pin|unpin)\s+"
        r"(?:(?:your|ur|that|the|this)\s+)?(?:(?:last|previous|earlier|first|latest)\s+)?"
        r"(?:message|msg|reply|response|post|answer)s?\b",
        r"\b(?:edit[ae]r?|apag[ae]r?|delet[ae]r?|exclu[ai]r?|remov[ae]r?|corrij[ae]|corrig[ae]|corrigir|"
        r"mud[ae]r?|alter[ae]r?|reescrev[ae]r?|fix[ae]r?)" + _GAP + r"(?:mensage(?:m|ns)|msg|resposta)\b",
        r"\b(?:edita|editar|borra|borrar|elimina|eliminar|corrige|corregir|cambia|cambiar|modifica|modificar|"
        r"reescribe|fija|fijar)" + _GAP + r"(?:mensajes?|respuesta|msg)\b",
        r"\b(?:отредактируй|измени|удали|исправь|сотри|поправь|перепиши|закрепи)(?:те)?"
        + _GAP
        + r"(?:сообщени\w*|ответ\w*)",
    ),
    "metadata": _rules(
        r"\bwhen\s+did\s+(?:i|you|we)\s+(?:say|send|write|mention|post|ask|tell|talk)\b",
        r"\bwhat\s+time\s+(?:did|was)\s+(?:i|you|that|it|my|your)\b",
        r"\b(?:message|msg)\s+(?:id|ids|time|times|timestamps?|link|date)\b",
        r"\btimestamps?\b",
        r"\bhow\s+long\s+ago\s+did\s+(?:i|you|we)\b",
        r"\bquando\s+(?:eu|voce|nos|tu)\s+(?:disse|falei|mandei|enviei|escrevi|perguntei|disseste|falou|mandou|escreveu)\b",
        r"\bque\s+horas\s+(?:eu|voce)\s+(?:mandei|enviei|disse|escrevi|mandou)\b",
        r"\b(?:id|horario|hora|data)\s+da\s+mensagem\b",
        r"\bcuando\s+(?:te\s+)?(?:dije|mande|envie|escribi|pregunte|dijiste|mandaste|escribiste)\b",
        r"\ba\s+que\s+hora\s+(?:te\s+)?(?:dije|mande|envie|escribi)\b",
        r"\b(?:id|hora|fecha)\s+del\s+mensaje\b",
        r"\bкогда\s+(?:я|ты|мы)(?:\s+\S+){0,2}\s+(?:сказал|написал|отправил|спросил|говорил)",
        r"\b(?:id|ид|время|дата)\s+сообщени",
    ),
    "user_info": _rules(
        r"\bcall\s+me\s+(?!(?:when|later|back|if|tomorrow|tonight|after|before|sometime|maybe|at|in|on|now|soon|"
        r"please|again|up|out|anytime)\b)\w+",
        r"\bdon'?t\s+call\s+me\b",
        r"\bmy\s+(?:pronouns|time\s*zone|timezone|nickname|preferred\s+name)\b",
        r"\b(?:i\s+use|use)\s+(?:he|she|they|it|xe|ze)/(?:him|her|them|its|xem|zir|hir)\b",
        r"\bi'?m\s+(?:in|on)\s+(?:utc|gmt)",
        r"\b(?:address|refer\s+to)\s+me\s+as\b",
        r"\b(?:me\s+cham[ae]|pode\s+me\s+chamar|nao\s+me\s+chame)\s+de\b",
        r"\bmeus\s+pronomes\b|\bmeu\s+fuso(?:\s+horario)?\b|\bmeu\s+apelido\b",
        r"\bllamame\b(?!\s+(?:manana|luego|despues|mas\s+tarde|cuando|si|a\s+las|en)\b)",
        r"\b(?:me\s+puedes\s+llamar|no\s+me\s+llames)\b",
        r"\bmis\s+pronombres\b|\bmi\s+zona\s+horaria\b|\bmi\s+apodo\b",
        r"\b(?:зови|называй|не\s+называй)(?:те)?\s+меня\b",
        r"\bобращайся\s+ко\s+мне\b|\bмои\s+местоимения\b|\bмой\s+часовой\s+пояс\b",
    ),
    "capabilities": _rules(
        r"\bwhat\s+(?:else\s+)?can\s+you\s+do\b",
        r"\b(?:which|what)\s+tools\b",
        r"\bwhat\s+(?:are\s+)?your\s+(?:tools|capabilities|abilities|functions|features)\b",
        # "why can't you search?", not "why can't you stay?"
        r"\bwhy\s+(?:can'?t|cannot|couldn'?t|didn'?t|won'?t)\s+you\s+(?:just\s+)?(?:search|look|remember|read|open|"
        r"see|browse|access|use|set|fetch|check|find|save|do\s+that)\b",
        r"\bdo\s+you\s+have\s+(?:access\s+to\s+)?(?:any\s+)?(?:tools|the\s+internet|internet|web\s+search|memory)\b",
        r"\b(?:what|which)\s+(?:ai\s+)?model\s+are\s+you\b",
        r"\bo\s+que\s+(?:mais\s+)?(?:voce|tu)\s+(?:consegue|pode|podes|sabe|sabes)\s+fazer\b",
        r"\b(?:quais|que)\s+(?:sao\s+)?(?:as\s+)?(?:suas\s+|tuas\s+)?ferramentas\b",
        r"\bpor\s*que\s+(?:voce\s+|tu\s+)?nao\s+(?:consegue|consegues|pode|podes)\s+(?:pesquisar|buscar|lembrar|ler|"
        r"abrir|ver|acessar|usar|salvar|criar|fazer\s+isso)\b",
        r"\bque\s+(?:mas\s+)?puedes\s+hacer\b",
        r"\b(?:que|cuales\s+son\s+tus)\s+(?:herramientas|capacidades|funciones)\b",
        r"\bpor\s*que\s+no\s+(?:puedes|pudiste)\s+(?:buscar|recordar|leer|abrir|ver|acceder|usar|guardar|crear|"
        r"hacer\s+eso)\b",
        r"\bчто\s+(?:ещ[её]\s+)?ты\s+(?:умеешь|можешь)\b",
        r"\bкакие\s+(?:у\s+тебя\s+)?(?:есть\s+)?инструменты\b",
        r"\bпочему\s+ты\s+не\s+(?:можешь|умеешь|смог)\s+(?:искать|найти|поискать|запомнить|прочитать|открыть|"
        r"посмотреть|использовать|сохранить|сделать\s+это)",
    ),
}

# Which tool families a trigger declares: looking something up often needs the page read next, and
# a memory request may be about the short-term one.
FAMILIES_OF: dict[str, tuple[str, ...]] = {
    "task": ("task",),
    "web_search": ("web_search", "url_fetch"),
    "url_fetch": ("url_fetch",),
    "memory": ("memory", "short_term_memory"),
    "document": ("document",),
    "manage_message": ("manage_message",),
    "metadata": ("metadata",),
    "user_info": ("user_info",),
    "capabilities": ("capabilities",),
}

# Right after a tool turn: "do it again but shorter", "faz de novo", "otra vez", "ещё раз".
FOLLOW_UP = _c(
    r"\b(?:do|try|say|write|make|run|send)\s+(?:it|that|this|one)\s+(?:again|once\s+more)\b",
    r"\b(?:try\s+again|one\s+more\s+time|once\s+more|same\s+thing|same\s+again|another\s+one|do\s+another|retry)\b",
    r"\b(?:use\s+(?:that|it|the\s+same)|the\s+same\s+(?:one|way)|again\s+but|but\s+(?:shorter|longer|simpler))\b",
    r"\b(?:fa(?:z|ca)\s+(?:isso\s+)?de\s+novo|de\s+novo|novamente|mais\s+uma\s+vez|outra\s+vez|o\s+mesmo)\b",
    r"\b(?:otra\s+vez|de\s+nuevo|una\s+vez\s+mas|hazlo\s+otra\s+vez|lo\s+mismo|otro\s+mas|intentalo)\b",
    r"\b(?:ещ[её]\s+раз|повтори(?:те)?|то\s+же\s+самое|ещ[её]\s+одн\w*|попробуй\s+(?:ещ[её]|снова))\b",
)
# A whole message that only agrees ("please", "sim") continues the tool turn before it.
BARE_FOLLOW_UP = frozenset(
    {
        "please",
        "pls",
        "yes",
        "yes please",
        "yeah",
        "yep",
        "ok",
        "okay",
        "sure",
        "go ahead",
        "do it",
        "go on",
        "again",
        "sim",
        "por favor",
        "pode",
        "pode sim",
        "claro",
        "faz isso",
        "vai",
        "si",
        "dale",
        "hazlo",
        "vale",
        "adelante",
        "да",
        "давай",
        "пожалуйста",
        "ага",
        "конечно",
        "сделай",
        "да пожалуйста",
    }
)
