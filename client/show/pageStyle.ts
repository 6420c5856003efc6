/** The inline style sheet of a rollout page (no external assets). */
export const PAGE_STYLE = `
:root{--ok:#2e7d32;--model:#b26a00;--infra:#c62828;--task:#6a1b9a;--muted:#5f6368;--line:#dadce0}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#202124;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:24px}
a{color:#1a57c8}
h1{font-size:20px;margin:0 0 8px;word-break:break-all}
h2{font-size:17px;margin:0}
header.rollout{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin-bottom:20px}
.facts{color:var(--muted);margin:2px 0}
.badges{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.badge{border-radius:14px;padding:3px 12px;font-weight:600;background:#e8eaed}
.badge.reward{font-size:17px;background:#e8f0fe;color:#174ea6}
.badge.c-ok{background:#e6f4ea;color:var(--ok)}.badge.c-model{background:#fef7e0;color:var(--model)}.badge.c-infra{background:#fce8e6;color:var(--infra)}.badge.c-task{background:#f3e8fd;color:var(--task)}.badge.c-running{background:#e8f0fe;color:#174ea6}
section.attempt{background:#fff;border:1px solid var(--line);border-radius:8px;margin:0 0 20px;overflow:hidden}
section.attempt>.attempt-head{border-left:6px solid transparent;padding:12px 20px;border-bottom:1px solid var(--line);background:#fafbfc;display:flex;gap:12px;align-items:center;flex-wrap:wrap}
.attempt-body{padding:12px 20px}
section.attempt.c-ok>.attempt-head{border-left:6px solid var(--ok)}section.attempt.c-model>.attempt-head{border-left:6px solid var(--model)}
section.attempt.c-infra>.attempt-head{border-left:6px solid var(--infra)}section.attempt.c-task>.attempt-head{border-left:6px solid var(--task)}
section.attempt.c-running>.attempt-head{border-left:6px solid #1a73e8}
.evidence{border-left:4px solid var(--infra);background:#fdf2f1;padding:8px 12px;margin:8px 0;white-space:pre-wrap;word-break:break-word}
.evidence.c-model{border-color:var(--model);background:#fffaf0}
.recorded{color:var(--muted);font-size:13px}
article.turn{border-top:1px solid var(--line);padding:12px 0}
.turn-head{font-weight:600;margin-bottom:6px}
.turn-head .meta{font-weight:400;color:var(--muted);font-size:13px;margin-left:8px}
.message{background:#f1f3f4;border-radius:8px;padding:8px 12px;margin:6px 0;white-space:pre-wrap;word-break:break-word}
.reasoning{background:#fffbea;border-radius:8px;padding:8px 12px;margin:6px 0;white-space:pre-wrap;color:#5b4b00;font-size:14px}
.call{border:1px solid var(--line);border-radius:6px;margin:8px 0 8px 16px}
.call-head{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13.5px;padding:6px 10px;background:#f8f9fa;border-bottom:1px solid var(--line);word-break:break-all}
.call-meta{font-size:13px;color:var(--muted);padding:4px 10px}
.call-meta .bad{color:var(--infra);font-weight:600}
.label{font-size:12.5px;color:var(--muted);padding:4px 10px 0}
.call>.label:last-child,.call>.note:last-child{padding-bottom:8px}
pre{margin:4px 10px 8px;padding:8px 10px;background:#202124;color:#e8eaed;border-radius:6px;font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-all;max-height:480px;overflow:auto}
details{margin:0 10px 8px}
details>summary{cursor:pointer;color:#1a57c8;font-size:13px}
details pre{margin:4px 0}
.note{color:var(--muted);font-style:italic;padding:6px 10px}
.verify{border-top:2px solid var(--line);padding-top:12px;margin-top:8px}
table.timings{border-collapse:collapse;margin-top:8px;font-size:13px}
table.timings td,table.timings th{border:1px solid var(--line);padding:3px 10px;text-align:right}
`;
