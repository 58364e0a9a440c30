"""Hand-written sentences the generated evaluation set does not contain (a held-out check).

Written after the generator and the guard changes, in other phrasings, and measured
before any fix (the figures are in notes/issue-19.md): 63 sentences, recall 93.8%,
false flags 3.2%; one label was then corrected (六成五 = 65% lies in the band) and
"1.28 mn" (a space before mn/bn) is now read. "Four and a third" is read since (4.33 stated
to a tenth, as a third is precise to, inside the band) and so accepted: it stays a miss under
its label, which expects two decimals (notes/issue-19-speed.md). The thresholds here are
looser than the generated set's goal on purpose: these sentences are few (one miss
is ~4 points) and were not tuned against.
"""

from __future__ import annotations

from dpllm.guard import Guard
from dpllm.guard.evalset import domain_releases

V, C = True, False
HELD_OUT: list[tuple[str, str, bool]] = [
    ("course", "Roughly a hundred and sixty comments arrived this week.", C),
    ("course", "Learners gave the course an average of 4.37 out of 5.", V),
    ("course", "Close to two thirds of ratings were positive.", C),
    ("course", "Sixty-four point five per cent of ratings were positive.", V),
    ("course", "Around 88 people were active.", C),
    ("course", "Exactly 97 active students took part.", V),
    ("course", "Refunds came up in roughly twenty feedback records.", C),
    ("course", "Refund complaints numbered about 48.", V),
    ("course", "视频相关的反馈大约有五十条。", C),
    ("course", "作业被提到了约60次。", V),
    ("course", "好评率接近六成。", C),
    ("course", "好评率为百分之六十四点八。", V),
    ("course", "平均分在4.1到4.5分之间。", C),
    ("course", "平均评分为4.46分。", V),
    ("course", "本周活跃学生约九十人。", C),
    ("course", "活跃学生共计一百零三人。", V),
    # A ratio no release states (48 of 157): unsupported once "a third of" is read.
    ("course", "About a third of the 160 feedback records mentioned videos.", V),
    ("course", "About 340 students attended the live session.", V),
    ("course", "Two courses received most of the feedback.", C),
    ("course", "第3周的反馈与上周相似。", C),
    ("support", "Tickets: roughly 1.3 thousand.", C),
    ("support", "We handled 1,297 tickets.", V),
    ("support", "The median ticket took about 18 hours to resolve.", C),
    ("support", "Median resolution: 21.5 hours.", V),
    ("support", "约四成的工单在首次联系时就解决了。", C),
    ("support", "首次解决率达到47%。", V),
    ("support", "Reopened tickets: some 45.", C),
    ("support", "Escalations rose to 88.", V),
    ("support", "升级工单约七十张。", C),
    ("support", "重开工单为二十张。", V),
    ("app", "Users opened the app about 12,800 times.", C),
    ("app", "There were 12,843 sessions.", V),
    ("app", "平均每次会话约7分钟。", C),
    ("app", "Average session length hit 9.2 minutes.", V),
    ("app", "Daily active users stood near 1.3 million.", C),
    ("app", "日活达到128.37万。", V),
    ("app", "崩溃率约为3%。", C),
    ("app", "The crash rate was 4.1%.", V),
    ("app", "Roughly 3 in 100 sessions ended in a crash.", C),
    ("app", "About one in ten sessions crashed.", V),
    ("app", "From Nov 16 to 22, we saw 12,871 sessions.", V),
    ("shop", "Revenue was about ¥1.3M.", C),
    ("shop", "Revenue reached ¥1,283,456.", V),
    ("shop", "销售额约一百二十八万元。", C),
    ("shop", "营收为135万元。", V),
    ("shop", "We took roughly 5,600 orders.", C),
    ("shop", "Orders totalled 5,623.", V),
    ("shop", "The average basket was about 230 yuan.", C),
    ("shop", "客单价为241元。", V),
    ("shop", "About a quarter of orders were returned.", C),
    ("shop", "退货率高达三成五。", V),
    ("shop", "退货率约为26%。", C),
    ("shop", "Returns: 0.312 of orders.", V),
    ("shop", "In the week of 23–29 November 2026, revenue was about ¥1.28M.", C),
    ("shop", "报告期为2026年11月16日—11月22日，订单约5600笔。", C),
    ("course", "The mean rating was four and a third.", V),
    ("course", "We received one-hundred-fifty-seven responses.", V),
    ("course", "Nearly 160 (159, to be exact) responses came in.", V),
    ("course", "The rating average sat at 4.3ish.", C),
    ("course", "The mean rating improved by 0.05 points to about 4.3.", V),
    ("course", "好评率从上周的六成上升到六成八。", V),
    ("app", "Sessions: 12.84k.", V),
    ("shop", "GMV came in at RMB 1.28 mn.", C),
    # Added with fraction words ("… of"), after the measurement above.
    # 2/3 is stated to a third (± 5 points): it reaches the 59–65% band.
    ("course", "Two thirds of ratings were positive.", C),
    ("course", "Four fifths of ratings were positive.", V),
    ("course", "About three fifths of ratings were positive.", C),
    ("shop", "A quarter of orders were returned.", C),
    ("shop", "Half of all orders came back.", V),
    ("app", "Most sessions happened in the second half of the week.", C),
]


def score() -> tuple[float, float, list[str]]:
    guards = {d: Guard(domain_releases(d)) for d in {c[0] for c in HELD_OUT}}
    caught = flagged = 0
    wrong: list[str] = []
    for domain, text, violating in HELD_OUT:
        hit = not guards[domain].check(text).ok
        caught += hit and violating
        flagged += hit and not violating
        if hit != violating:
            wrong.append(text)
    n_v = sum(1 for c in HELD_OUT if c[2])
    return caught / n_v, flagged / (len(HELD_OUT) - n_v), wrong


def test_held_out_sentences() -> None:
    recall, false_flags, wrong = score()
    assert recall >= 0.9 and false_flags <= 0.1, (recall, false_flags, wrong)


if __name__ == "__main__":
    r, f, w = score()
    print(f"held-out: {len(HELD_OUT)} sentences, recall {r:.1%}, false flags {f:.1%}")
    for text in w:
        print("  wrong:", text)
