#!/usr/bin/python3
"""Writes corpus.txt, the tokenizer parity corpus (deterministic: fixed seed, no inputs).

Each output line is one test text in escaped form: the two-character sequences \\n, \\t and
\\\\ stand for a newline, a tab and a backslash (as `nightlora tokenize --escaped` and
tools/js/tokenize_oracle.mjs read them).

Run:  /usr/bin/python3 tests/data/tokenizer/make_corpus.py

Characters deliberately left out, because the reference implementations disagree among
themselves on them (see tests/tokenizer/tokenizer_parity_test.cpp): U+0085 and U+FEFF
(whether they are `\\s` differs between Oniguruma, which HF tokenizers use, and JavaScript),
U+017F and U+212A (case-folding in `(?i:'s)`), and characters assigned after Unicode 14.
"""
import os
import random

rng = random.Random(20261129)
lines = []


def add(s):
    lines.append(s)


WORDS = ("the a an of to and in is was it that he she they we you I for on with as at by from "
         "this be have not but what all were when there can said which their if do will each "
         "about how up out them then many some so these would other into has more her two like "
         "him see time could no make than first been its who now people my made over did down "
         "only way find use may water long little very after words called just where most know "
         "story garden little girl named Lily loved play outside park ball happy together friend "
         "Tokenization matters because models see numbers not letters").split()
CONTRACTIONS = ["it's", "don't", "we're", "they've", "I'm", "you'll", "she'd", "IT'S", "DON'T",
                "We'Re", "THEY'VE", "I'M", "YOU'LL", "SHE'D", "rock'n'roll", "o'clock", "'s", "'tis"]
PUNCT = list(".,;:!?") + ["...", "?!", "!!!", " -", " --", " (", ")", '"', "'", "`", "*", "_"]


def sentence():
    n = rng.randint(3, 16)
    ws = []
    for i in range(n):
        w = rng.choice(WORDS) if rng.random() > 0.12 else rng.choice(CONTRACTIONS)
        if i == 0 or rng.random() < 0.08:
            w = w[:1].upper() + w[1:]
        ws.append(w)
        if rng.random() < 0.1:
            ws[-1] += rng.choice([",", ";", ":"])
    return " ".join(ws) + rng.choice([".", "!", "?", "...", ".\"", "'"])


# English prose and contractions.
for _ in range(420):
    k = rng.randint(1, 4)
    add(" ".join(sentence() for _ in range(k)))
for c in CONTRACTIONS:
    add(c)
    add("I said " + c + " twice: " + c + c)

CODE = [
    'int main(int argc, char** argv) {\n  printf("%d\\n", argc);\n  return 0;\n}',
    'def f(x):\n    return {"a": [1, 2, 3], \'b\': x ** 2}\n',
    "for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];",
    "const re = /\\s+(?!\\S)/gu; // whitespace runs",
    "SELECT id, name FROM users WHERE email LIKE '%@example.com' ORDER BY id DESC;",
    "<div class=\"row\"><span>&nbsp;Hi</span></div>",
    "{\"key\": \"value\", \"n\": 12345, \"list\": [true, false, null]}",
    "#include <vector>\n#include \"nightlora/tokenizer/tokenizer.h\"",
    "if x != y and not z:\n\tpass\n\telse:\n\t\traise ValueError('bad')",
    "$ ls -la /usr/bin | grep -E '^-rwx' > out.txt 2>&1",
    "path = r\"C:\\Users\\name\\file.txt\"",
    "a\\b\\\\c \\n is not a newline here",
    "lambda x: x[::-1] + x[1:-1]",
    "    indented four\n        indented eight\n\t\ttabs",
    "git commit -m \"fix: don't crash on empty input\" && git push origin main",
    "x=1;y=2;z=x<<y|0xFF&~0b1010",
    "std::unordered_map<std::string, int32_t> vocab_; // id lookup",
    "```python\nprint('hello')\n```",
    "// TODO(someone): handle \\r\\n line endings",
    "fn main() { let v: Vec<u8> = vec![0; 16]; println!(\"{:?}\", v); }",
]
IDENTS = ["foo", "bar_baz", "camelCase", "snake_case_name", "HTTPServer", "XMLHttpRequest", "i", "j2",
          "__init__", "getValue", "MAX_SIZE", "_private", "tensor_4d"]
for c in CODE:
    add(c)
for _ in range(180):
    a, b, c = rng.choice(IDENTS), rng.choice(IDENTS), rng.choice(IDENTS)
    form = rng.randint(0, 5)
    if form == 0:
        add(f"{a} = {b}({c}, {rng.randint(0, 999)})")
    elif form == 1:
        add(f"if ({a} >= {rng.randint(-50, 50)}) {{\n{' ' * rng.randint(1, 8)}{b}++;\n}}")
    elif form == 2:
        add(f"def {a}(self, {b}={rng.random():.3f}):\n\treturn self.{c}")
    elif form == 3:
        add(f"{a}.{b}[{rng.randint(0, 9)}] += {c} * {rng.uniform(-1e3, 1e3):.6g};")
    elif form == 4:
        add(f"\"{a}\": {{\"{b}\": [{', '.join(str(rng.randint(0, 99)) for _ in range(rng.randint(1, 6)))}]}}")
    else:
        add(f"#define {a.upper()} ({rng.randint(1, 1 << 20)} << {rng.randint(0, 31)})")

# Numbers.
for _ in range(200):
    form = rng.randint(0, 7)
    if form == 0:
        add(str(rng.randint(0, 10 ** rng.randint(1, 15))))
    elif form == 1:
        add(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}")
    elif form == 2:
        add(f"{rng.randint(1, 10**9):,}")
    elif form == 3:
        add(f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}")
    elif form == 4:
        add(f"+1 ({rng.randint(200, 999)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}")
    elif form == 5:
        add(f"0x{rng.getrandbits(32):08x} 0b{rng.getrandbits(8):08b} {rng.getrandbits(16)}")
    elif form == 6:
        add(f"{rng.randint(1, 99)}% of {rng.randint(100, 99999)} is {rng.random() * 100:.2f}; v{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}")
    else:
        add(" ".join(str(rng.randint(0, 9999)) for _ in range(rng.randint(2, 10))))
for s in ["١٢٣٤٥ ٦٧٨", "१२३४५", "一二三四五", "Ⅻ ⅷ ½ ¾ ² ³", "①②③", "１２３４５ ＡＢＣ", "3.14159265358979323846"]:
    add(s)

# Scripts: CJK, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Korean, Japanese.
CJK = ["我喜欢在公园里散步。", "今天天气很好，我们去爬山吧！", "机器学习模型需要大量的数据。", "这是一个测试句子，包含标点符号：“你好”。",
       "東京は日本の首都です。", "ひらがなとカタカナ、そして漢字。", "トークナイザーのテストです", "私は学生です。よろしくお願いします。",
       "안녕하세요. 만나서 반갑습니다.", "한국어 문장도 토큰화해야 합니다", "中文English混合text测试123", "繁體中文與簡體中文"]
OTHER = ["Привет, как дела? Всё хорошо.", "Съешь же ещё этих мягких французских булок, да выпей чаю.",
         "Γειά σου Κόσμε! Ελληνικά γράμματα: αβγδε ΑΒΓΔΕ", "مرحبا بالعالم، هذا اختبار.", "שלום עולם, זה מבחן.",
         "नमस्ते दुनिया, यह एक परीक्षण है।", "สวัสดีชาวโลก นี่คือการทดสอบ", "Tiếng Việt có dấu: Nguyễn Trãi, điều khiển, ướt át",
         "Ελληνικά και English και Русский в одной строке", "ქართული ენა", "Հայերեն լեզու", "ᚠᚢᚦᚨᚱᚲ runes", "ʻŌlelo Hawaiʻi"]
for s in CJK + OTHER:
    add(s)
pool = CJK + OTHER
for _ in range(160):
    parts = [rng.choice(pool) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        parts.insert(rng.randint(0, len(parts)), sentence())
    add(rng.choice([" ", "", "\n", " - "]).join(parts))

# Accented Latin, precomposed and decomposed (NFC must compose these for Qwen).
ACCENTED = ["café", "naïve", "résumé", "Zürich", "Ångström", "façade", "jalapeño", "Crème brûlée", "Dvořák",
            "Łódź", "São Paulo", "Ærøskøbing", "straße", "ﬁnance ﬂow", "Ǆemal", "Ĳssel"]
DECOMPOSED = ["cafe\u0301", "nai\u0308ve", "re\u0301sume\u0301", "Zu\u0308rich", "A\u030Angstro\u0308m",
              "fac\u0327ade", "jalapen\u0303o", "Dvor\u030Ca\u0301k", "e\u0301\u0301 double acute", "o\u0308\u0304 stacked",
              "a\u0323\u0302 dot-below then circumflex", "a\u0302\u0323 circumflex then dot-below", "\u1100\u1161\u11A8 jamo",
              "\u1112\u1161\u11AB\u1100\u1173\u11AF", "\u212B angstrom sign", "\u0041\u030A", "q\u0307\u0323",
              "Vie\u0323\u0302t Nam", "\u00C5\u0301", "\u0344 greek dialytika tonos", "\u0958 devanagari qa"]
for s in ACCENTED + DECOMPOSED:
    add(s)
for _ in range(140):
    w = [rng.choice(ACCENTED + DECOMPOSED) for _ in range(rng.randint(1, 4))]
    add(" ".join(w) + rng.choice(["", ".", " is spelled differently", "!"]))

# Emoji, including ZWJ sequences, skin tones, flags and keycaps.
EMOJI = ["😀", "😂", "🤖", "🚀", "❤️", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "🧑🏿‍💻", "✨", "🔥", "🥐", "☕", "⚠️", "🐍"]
for e in EMOJI:
    add(e)
for _ in range(140):
    s = sentence()
    words = s.split(" ")
    for _ in range(rng.randint(1, 3)):
        words.insert(rng.randint(0, len(words)), "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3))))
    add(rng.choice([" ", "", "  "]).join(words))

# Whitespace runs: spaces, tabs, newlines, leading/trailing, whitespace-only lines.
WS = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", " \n", "\n ", " \n \n", "\t\n", "\u00A0", "\u3000", "\u2003", " \u00A0 "]
for w in WS:
    add(w)
    add("a" + w + "b")
    add(w + "leading")
    add("trailing" + w)
for _ in range(220):
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 8))]
    out = ""
    for wd in words:
        out += wd + rng.choice(WS + [" "] * 6)
    if rng.random() < 0.3:
        out = rng.choice(WS) + out
    add(out)

# Special tokens of Qwen, Llama 3 and TinyStories, whole, partial and glued to text.
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>", "<think>", "</think>",
            "<tool_call>", "<|start_story|>", "<|end_story|>", "<unk>", "<|im_start", "im_end|>", "<||>", "<|", "|>"]
for s in SPECIALS:
    add(s)
    add("x" + s + "y")
    add(" " + s + " ")
add("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n")
add("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
add("<|start_story|>Once upon a time, there was a little girl named Lily.<|end_story|>")
add("Once upon a time <|start_story|> in a land <|end_story|>far away")
for _ in range(160):
    parts = []
    for _ in range(rng.randint(2, 6)):
        parts.append(rng.choice(SPECIALS) if rng.random() < 0.4 else sentence())
    add(rng.choice(["", " ", "\n"]).join(parts))

# URLs, emails, markdown, punctuation runs, quotes.
MISC = ["https://example.com/path?query=1&x=y#frag", "mailto:someone@example.org", "user.name+tag@sub.domain.co.uk",
        "# Heading\n\n- item one\n- item two\n\n> quote", "**bold** _italic_ `code` ~~strike~~", "....!!!???,,,;;;",
        "«Bonjour» „Hallo“ ‘single’ “double”", "— en – dash … ellipsis • bullet", "§ ¶ © ® ™ ° ± × ÷",
        "<<<>>> ((())) [[[]]] {{{}}}", "a/b\\c|d", "@#$%^&*()_+-=[]{};':\",./<>?", "€100 £50 ¥3000 ₹99 ₿1",
        "I'm... not sure?! Really--maybe.", "C'est l'été, n'est-ce pas?", "He said: 'It's 5 o'clock.'"]
for s in MISC:
    add(s)
for _ in range(160):
    k = rng.randint(0, 3)
    if k == 0:
        add(f"https://{rng.choice(IDENTS)}.example/{rng.choice(WORDS)}/{rng.randint(1, 999)}?q={rng.choice(WORDS)}")
    elif k == 1:
        add(rng.choice(MISC) + " " + sentence())
    elif k == 2:
        add("".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 12))))
    else:
        add(sentence().upper() + " " + sentence().lower())

# Random mixtures of everything, to reach corners the templates above do not.
ALL_PIECES = WORDS + CONTRACTIONS + PUNCT + CJK + OTHER + ACCENTED + DECOMPOSED + EMOJI + WS + SPECIALS + MISC
while len(lines) < 2400:
    add("".join(rng.choice(ALL_PIECES) + rng.choice(["", " ", " ", "\n"]) for _ in range(rng.randint(1, 10))))


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


for s in lines:
    assert "\r" not in s and "\u0085" not in s and "\ufeff" not in s
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.txt")
with open(out, "w", encoding="utf-8", newline="\n") as f:
    for s in lines:
        f.write(escape(s) + "\n")
print(f"wrote {len(lines)} lines to {out}")
