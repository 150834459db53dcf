# The two commands of the README:  make book  (install + build the website)  and  make test  (what CI checks).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
CHAPTERS  := $(wildcard book/[0-9][0-9]_*.ipynb)
NOTEBOOKS := $(CHAPTERS) $(wildcard book/appendix_*.ipynb)
ZH_NOTEBOOKS := $(wildcard book/zh/[0-9][0-9]_*.ipynb) $(wildcard book/zh/appendix_*.ipynb)
# `make test` runs these short Chinese chapters after the site builds and the browser tests, so that both lanes
# of its last stage end together; the rest beside them
ZH_LATE := book/zh/05_positional_encoding.ipynb book/zh/06_decoder_masking.ipynb book/zh/09_timing_attention.ipynb \
	book/zh/appendix_mistakes.ipynb
ZH_EARLY := $(filter-out $(ZH_LATE),$(ZH_NOTEBOOKS))
# `make test` hands pytest-xdist whole files (a notebook's cells stay in one kernel, in order) in this order, the
# slowest first (measured with --durations=0), so that no long file starts while the other worker runs dry
SLOW_FIRST := tests/test_remote.py tests/test_student.py book/12_training_real_text.ipynb \
	tests/test_exercises_ch09.py tests/test_grade_attacks.py tests/test_exercises_ch10.py tests/test_colab.py \
	tests/test_grade.py tests/test_grade_shards.py tests/test_exercises_ch04.py tests/test_exercises_ch08.py \
	book/08_bert_vs_gpt.ipynb \
	book/10_timing_decoding.ipynb book/06_decoder_masking.ipynb tests/test_exercises_ch05.py
TEST_FILES := $(SLOW_FIRST) $(filter-out $(SLOW_FIRST) tests/test_website.py,$(NOTEBOOKS) $(wildcard tests/test_*.py))
# The Chinese site: built from book/zh/ (generated from the English notebooks and book/locale/zh/, never edited by
# hand) into _build/zh/, then placed at _build/html/zh/ next to the English site.
ZH_SITE = $(BIN)/jupyter-book build $(1) --keep-going book/zh --path-output _build/zh && \
	rm -rf _build/html/zh && cp -r _build/zh/_build/html _build/html/zh

.PHONY: install book serve screenshots test notebooks chapter translations clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# byte-compiled at install (no --no-compile): the grader's sandbox sees the environment read-only, so a
	@# module without its .pyc would be compiled again by every kernel it starts
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# MathJax and mermaid for the website, from package-lock.json (the site loads nothing from other hosts)
$(NPM_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "The website needs Node.js and npm for MathJax and mermaid (apt-get install nodejs npm)"; exit 1; }
	npm ci --no-audit --no-fund --ignore-scripts
	touch $(NPM_STAMP)

## make book: build the website, English and Chinese (_build/html/zh/), from the committed notebook outputs
book: install $(NPM_STAMP)
	$(BIN)/jupyter-book build --keep-going .
	$(call ZH_SITE,)
	@echo "Book built: open _build/html/index.html, or _build/html/zh/index.html for 中文版 (or run: make serve)"

## make serve: serve the built website on http://localhost:8000
serve: book
	$(BIN)/python -m http.server --directory _build/html 8000

## make screenshots: the browser tests on the built website (make book first), with screenshots of every chapter
## at desktop and phone width in _build/screenshots/ (make test takes none: they check nothing)
screenshots:
	ATTNBOOK_SITE=_build/html ATTNBOOK_SCREENSHOTS=_build/screenshots $(BIN)/python -m pytest tests/test_website.py -p no:cacheprovider -k chromium

## make test: the Chinese edition complete and current (every catalog entry translated, none fuzzy, the glossary
## obeyed, book/zh/ as the catalogs make it), unit and checker tests, exercise-version sync, strict nbval on every
## chapter natively, then on every Chinese chapter with ATEN_CPU_CAPABILITY=default (the same code and, but for the
## check cells' Chinese verdicts, the same outputs: tests/test_i18n.py checks), so an output that depends on the
## CPU's vector width fails on every machine; the mutant catalogue's score in both languages, graded (fails
## below 100%); from-scratch builds of both sites in which any warning is an error, then the website's tests on
## them (nothing loaded from other hosts; every page in headless Chromium)
test: install $(NPM_STAMP)
	$(BIN)/python -m tools.i18n check
	@# Two cores, never more than two busy processes (the timing chapters measure): first the tests on two
	@# workers, whole files, slowest first (SLOW_FIRST), which record every catalogue verdict (tests/test_remote.py)
	@# for the score the report prints; then the Chinese chapters' nbval (one thread, its log shown at the end)
	@# beside the two website builds and the website's tests, after which the four in ZH_LATE run (measured: the
	@# browser tests lost their screenshots, so the lane beside the long one takes one more chapter).
	rm -rf _build/catalogue && mkdir -p _build
	ATTNBOOK_CATALOGUE_RECORD=_build/catalogue $(BIN)/python -m pytest $(TEST_FILES) --nbval --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=25
	$(BIN)/python tools/mutant_report.py --recorded _build/catalogue
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest $(ZH_EARLY) --nbval --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider > _build/nbval-zh.log 2>&1 & nbval=$$!; \
	t=$$(date +%s); $(BIN)/jupyter-book build --all -W -n --keep-going . && \
	echo "--- English site built in $$(($$(date +%s) - t)) s" && t=$$(date +%s) && \
	$(call ZH_SITE,--all -W -n) && echo "--- Chinese site built in $$(($$(date +%s) - t)) s" && \
	ATTNBOOK_SITE=_build/html $(BIN)/python -m pytest tests/test_website.py -p no:cacheprovider; rest=$$?; \
	echo "--- strict nbval of $(ZH_LATE) with ATEN_CPU_CAPABILITY=default:"; \
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest $(ZH_LATE) --nbval --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider; late=$$?; \
	wait $$nbval; zh=$$?; echo "--- strict nbval of the other Chinese chapters with ATEN_CPU_CAPABILITY=default:"; cat _build/nbval-zh.log; \
	test $$rest -eq 0 && test $$late -eq 0 && test $$zh -eq 0

## make notebooks: after editing a chapter, re-execute it and regenerate the exercise versions; then the Chinese
## edition: catalogs updated (a changed sentence becomes fuzzy, a new one untranslated: translate them, see
## CONTRIBUTING.md), book/zh/ regenerated, its feedback cells re-run in Chinese
notebooks: install
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)
	$(BIN)/python -m attnbook.student
	$(BIN)/python -m tools.i18n update
	$(BIN)/python -m tools.i18n execute

## make chapter N=4: after editing chapter 4 (its notebook or its checkers), the same for that chapter alone:
## re-execute book/04_*.ipynb, regenerate its exercise version, update the catalogs (then translate what
## `python -m tools.i18n todo 04_...` lists, and run it again), re-run its Chinese notebook, and score its mutant
## catalogue in English and Chinese
chapter: install
	@test -n "$(N)" || { echo "say which chapter: make chapter N=4"; exit 2; }
	@nb=$$(ls book/$$(printf %02d $(N))_*.ipynb 2>/dev/null); test -n "$$nb" || { echo "no book/$$(printf %02d $(N))_*.ipynb"; exit 2; }; \
	set -e; $(BIN)/python tools/execute_notebooks.py $$nb; \
	$(BIN)/python -m attnbook.student $$nb; \
	$(BIN)/python -m tools.i18n update; \
	$(BIN)/python -m tools.i18n execute $(N); \
	$(BIN)/python tools/mutant_report.py --chapter $(N)

## make translations: after editing English text, mark what the Chinese edition must translate again
translations: install
	$(BIN)/python -m tools.i18n update
	$(BIN)/python -m tools.i18n build

clean:
	rm -rf _build node_modules
