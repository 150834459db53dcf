# The two commands of the README:  make book  (install + build the website)  and  make test  (what CI checks).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
CHAPTERS  := $(wildcard book/[0-9][0-9]_*.ipynb)
NOTEBOOKS := $(CHAPTERS) $(wildcard book/appendix_*.ipynb)

.PHONY: install book serve test notebooks clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# MathJax and mermaid for the website, from package-lock.json (the site loads nothing from other hosts)
$(NPM_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "The website needs Node.js and npm for MathJax and mermaid (apt-get install nodejs npm)"; exit 1; }
	npm ci --no-audit --no-fund --ignore-scripts
	touch $(NPM_STAMP)

## make book: build the website from the committed notebook outputs
book: install $(NPM_STAMP)
	$(BIN)/jupyter-book build --keep-going .
	@echo "Book built: open _build/html/index.html (or run: make serve)"

## make serve: serve the built website on http://localhost:8000
serve: book
	$(BIN)/python -m http.server --directory _build/html 8000

## make test: unit and checker tests, exercise-version sync, strict nbval on every chapter (natively, then again with
## ATEN_CPU_CAPABILITY=default, so an output that depends on the CPU's vector width fails on every machine), the
## mutant catalogue's score (fails below 100%), then a
## from-scratch book build in which any warning is an error, then the website's tests on that build (nothing loaded
## from other hosts; every page in headless Chromium, screenshots in _build/screenshots)
test: install $(NPM_STAMP)
	$(BIN)/python -m pytest tests $(NOTEBOOKS) --ignore=tests/test_website.py --nbval --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest $(NOTEBOOKS) --nbval --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider
	$(BIN)/python tools/mutant_report.py
	$(BIN)/jupyter-book build --all -W -n --keep-going .
	ATTNBOOK_SITE=_build/html $(BIN)/python -m pytest tests/test_website.py -p no:cacheprovider

## make notebooks: after editing a chapter, re-execute it and regenerate the exercise versions
notebooks: install
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)
	$(BIN)/python -m attnbook.student

clean:
	rm -rf _build node_modules
