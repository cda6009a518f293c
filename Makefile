# sparkfleet.serving: one entry point for set-up, the demo cluster and the tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv/bin
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.collections
export MOLECULE_GLOB := molecule/*/molecule.yml

INVENTORY ?= inventory/sim
# The twin's inventories vault their (fake) secrets like a real cluster would.
VAULT := $(if $(findstring inventory/sim,$(INVENTORY)),--vault-password-file twin/vault-password)
S ?=
# The 4-node twin's scenario, the 2-node twin's scenarios, and the checks followed by the
# ssh twin's scenario run in three lanes at once (tools/lanes.sh; most of a scenario's wall
# time is waiting on its twin; each twin has its own names and subnets);
# S=<scenario ...> runs the named ones one after another.
QUAD := default
PAIR := two_node canary
AFTER_CHECKS := ssh
# The 4-node lane is the suite's critical path: the other lanes' controller processes
# (ansible, pytest, linters) yield the CPU to it and use what it leaves while it waits
# on the twin. The twins' own processes run under dockerd, at normal priority.
PAIR_NICE := nice -n 5
CHECKS := lint sanity unit twin
# Each lane's command, written once for `make molecule` and `make test`.
LANE_QUAD := bash tools/scenarios.sh $(QUAD)
LANE_PAIR := $(PAIR_NICE) bash tools/scenarios.sh $(PAIR)
LANE_SSH := $(PAIR_NICE) bash tools/scenarios.sh $(AFTER_CHECKS)

.PHONY: help setup images demo demo-down status lint sanity unit profile-spec role-docs twin molecule checks test bench bench-engine clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

setup: ## Install host packages, start dockerd, create .venv and the collection link
	@bash tools/host-deps.sh
	@bash tools/setup-venv.sh

images: setup ## Build the twin's images (node, SGLang stand-in); cached
	@bash twin/images/build.sh all

demo: images ## Bring up a 4-node simulated cluster, run site.yml, print the cluster report
	$(VENV)/ansible-playbook -i $(INVENTORY) $(VAULT) twin/playbooks/create.yml
	$(VENV)/ansible-playbook -i $(INVENTORY) $(VAULT) site.yml
	$(VENV)/ansible-playbook -i $(INVENTORY) $(VAULT) playbooks/status.yml

status: setup ## Print the cluster report of INVENTORY (read-only)
	$(VENV)/ansible-playbook -i $(INVENTORY) $(VAULT) playbooks/status.yml

demo-down: setup ## Remove the simulated cluster
	$(VENV)/ansible-playbook -i $(INVENTORY) $(VAULT) twin/playbooks/destroy.yml

lint: setup ## ansible-lint (production), yamllint, ruff, shellcheck, antsibull-docs, galaxy-importer + ansible-builder
	$(VENV)/yamllint -s .
	$(VENV)/ansible-lint
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	shellcheck tools/*.sh twin/images/build.sh twin/images/node/sparksim-init twin/engine/build.sh twin/mirror/entrypoint.sh
	$(VENV)/antsibull-docs lint-collection-docs --plugin-docs .
	bash tools/galaxy-check.sh

sanity: setup ## ansible-test sanity on a copy of the checkout
	bash tools/sanity.sh

unit: setup ## Unit tests (modules, module_utils, plugin_utils, filters, presets) and offline inventory checks
	$(VENV)/python -m pytest tests/unit tests/playbooks -q --durations=12

profile-spec: setup ## Write the sglang role's entry point profile from plugins/module_utils/_profile_schema.py
	$(VENV)/python tools/profile_spec.py

role-docs: setup ## Write every role's argument specs, defaults and README from meta/variables.yml (make unit fails when stale)
	$(VENV)/python tools/register.py
	$(VENV)/python tools/role_docs.py

twin: images ## Tests of the SGLang stand-in image itself
	$(VENV)/python -m pytest tests/twin -q

molecule: images ## Molecule scenarios on the simulated clusters, 4-node, 2-node and ssh lanes at once (S=<scenario> for one)
ifneq ($(S),)
	@bash tools/scenarios.sh $(S)
else
	@bash tools/lanes.sh quad '$(LANE_QUAD)' pair '$(LANE_PAIR)' ssh '$(LANE_SSH)'
endif

checks: setup ## lint, sanity, unit and twin, each timed (each runs; fails if any failed)
	@status=0; for stage in $(CHECKS); do \
	  bash tools/stage.sh $$stage $(MAKE) --no-print-directory $$stage || status=1; \
	done; exit $$status

test: setup images ## Everything CI runs: the 4-node scenario, the 2-node scenarios and the checks, each in its lane
	@rm -f .cache/stages.log; status=0; \
	bash tools/lanes.sh quad '$(LANE_QUAD)' pair '$(LANE_PAIR)' \
	  checks '$(PAIR_NICE) $(MAKE) --no-print-directory checks; c=$$?; $(LANE_SSH) || c=1; exit $$c' || status=1; \
	echo "== stages (wall time; the lanes overlap)"; cat .cache/stages.log; \
	bash tools/failed-tails.sh; exit $$status

bench: setup ## The collection's own speed on the twin: 2, 4, 8 nodes (BENCH_RUNS=3, BENCH_SIZES=2,4,8); bench/results/ + docs/benchmarks.md
	$(VENV)/python tools/bench.py

bench-engine: setup ## Engine benchmark of INVENTORY from its head (playbooks/bench.yml); prints the results directory
	$(VENV)/ansible-playbook -i $(INVENTORY) $(VAULT) playbooks/bench.yml

clean: demo-down ## Remove the twin and build artefacts (keeps images and .venv)
	rm -rf .cache/sanity tests/output
